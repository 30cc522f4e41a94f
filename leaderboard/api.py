"""REST API for the board (read-only, public)."""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from . import selectors


class LeaderboardApi(APIView):
    def get(self, request: Request) -> Response:
        suite = selectors.suite_version_pick(slug=request.query_params.get("suite"))
        hardware = selectors.hardware_pick(slug=request.query_params.get("hardware"))
        if suite is None or hardware is None:
            return Response({"detail": "Unknown suite or hardware."}, status=404)
        rows = selectors.leaderboard_rows(suite=suite, hardware=hardware)
        return Response(
            {
                "suite": suite.slug,
                "hardware": hardware.slug,
                "results": [
                    {
                        "rank": rank,
                        "submission": row.submission_id,
                        "title": row.submission.title,
                        "owner": row.submission.owner.username,
                        "kind": row.submission.kind,
                        "dsl": row.submission.dsl,
                        "baseline": row.submission.is_baseline,
                        "aggregate": row.aggregate,
                        "aggregate_ci": [row.aggregate_ci_low, row.aggregate_ci_high],
                        "real_pass_rate": row.real_pass_rate,
                        "apparent_pass_rate": row.apparent_pass_rate,
                        "fallback_rate": row.fallback_rate,
                        "geomean_speedup_eager": row.geomean_speedup_eager,
                        "operator_scores": row.operator_scores,
                        "published_at": row.published_at,
                    }
                    for rank, row in enumerate(rows[:500], start=1)
                ],
            }
        )
