"""Reads for endpoints and campaigns (the submission page's campaign section). The board
selects an agent row's campaign with the row (``leaderboard.selectors.leaderboard_rows``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db.models import QuerySet

from . import charts
from .models import AgentEndpoint, Campaign

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from submissions.models import Submission


def endpoints_of(*, user: User) -> QuerySet[AgentEndpoint]:
    return AgentEndpoint.objects.filter(owner=user)


def campaign_section(*, submission: Submission, can_see_sources: bool) -> dict[str, Any]:
    """The submission page's campaign context: rounds per operator and the chart
    (empty for a bundle). Sources are shown to the owner and staff only."""
    campaign = (
        Campaign.objects.select_related("endpoint").filter(submission_id=submission.pk).first()
    )
    if campaign is None:
        return {}
    rounds = list(campaign.rounds.all())
    operators: dict[str, list[Any]] = {}
    for row in rounds:
        operators.setdefault(row.operator, []).append(row)
    return {
        "campaign": campaign,
        "campaign_operators": operators,
        "campaign_chart": charts.rounds_figure(rounds=rounds),
        "campaign_sources_visible": can_see_sources,
    }
