"""Public, read-only REST API of the board and the catalogue.

Every list is paginated (``?page=``, ``?page_size=``). The board rows come from
``selectors.leaderboard_rows``, the one ranking query the pages use too. Only published
suite versions, enabled hardware profiles and public shapes are served: hidden shapes are
scored but never shown.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.db.models import QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers
from rest_framework.generics import ListAPIView, RetrieveAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from atrex_site.api.errors import ErrorSerializer, error_response
from atrex_site.api.pagination import StandardPagination
from atrex_site.api.shared import shared_answer
from catalogue import selectors as catalogue_selectors
from catalogue.models import HardwareProfile, Shape, SuiteOperator, SuiteVersion
from submissions.models import Score
from submissions.selectors import submissions_visible_to

from . import selectors
from .comparison import ComparisonError, comparison_shareable, submissions_compare_shared

NOT_FOUND = OpenApiResponse(ErrorSerializer, description="No such resource.")


class HardwareProfileSerializer(serializers.ModelSerializer):
    peak_flops = serializers.DictField(
        child=serializers.FloatField(),
        help_text="Dense peak FLOP/s per execution path (bf16_tc, fp16_tc, fp8_e4m3_tc, ...).",
    )

    class Meta:
        model = HardwareProfile
        fields = ["slug", "name", "device_kind", "peak_flops", "hbm_bytes_per_s", "source", "notes"]


class SuiteVersionSerializer(serializers.ModelSerializer):
    slug = serializers.CharField(read_only=True, help_text="name-version, e.g. atrex-bench-v1")

    class Meta:
        model = SuiteVersion
        fields = [
            "slug", "name", "version", "description", "content_hash", "threshold_own_share",
            "published_at",
        ]  # fmt: skip


class SuiteOperatorSerializer(serializers.ModelSerializer):
    slug = serializers.CharField(source="operator.slug")
    atrex_id = serializers.CharField(source="operator.atrex_id")
    dtype = serializers.CharField(source="operator.dtype")
    phase = serializers.CharField(source="operator.phase")
    description = serializers.SerializerMethodField()

    class Meta:
        model = SuiteOperator
        fields = ["slug", "atrex_id", "dtype", "phase", "importance", "description"]

    def get_description(self, row: SuiteOperator) -> str:
        return row.description or row.operator.description


class SuiteVersionDetailSerializer(SuiteVersionSerializer):
    operators = serializers.SerializerMethodField()
    public_shapes = serializers.IntegerField(
        help_text="How many public shapes /shapes/ lists (hidden shapes are not counted)."
    )

    class Meta(SuiteVersionSerializer.Meta):
        fields = [*SuiteVersionSerializer.Meta.fields, "operators", "public_shapes"]

    @extend_schema_field(SuiteOperatorSerializer(many=True))
    def get_operators(self, suite: SuiteVersion) -> list[dict[str, Any]]:
        rows = catalogue_selectors.suite_operators(suite=suite)
        return SuiteOperatorSerializer(rows, many=True).data


class ShapeSerializer(serializers.ModelSerializer):
    operator = serializers.CharField(source="operator.slug")
    init_kwargs = serializers.DictField()
    input_kwargs = serializers.DictField()
    w_flops = serializers.DictField(
        child=serializers.IntegerField(), help_text="FLOPs of one call per dtype path."
    )

    class Meta:
        model = Shape
        fields = [
            "operator", "shape_id", "init_kwargs", "input_kwargs", "weight", "w_flops",
            "q_read", "q_write", "smoke", "source", "description",
        ]  # fmt: skip


class BoardRowSerializer(serializers.Serializer):
    rank = serializers.IntegerField(help_text="1 = best aggregate on this board.")
    submission = serializers.IntegerField(source="score.submission_id")
    title = serializers.CharField(source="score.submission.title")
    owner = serializers.CharField(source="score.submission.owner.username")
    kind = serializers.CharField(source="score.submission.kind")
    dsl = serializers.CharField(source="score.submission.dsl")
    baseline = serializers.BooleanField(source="score.submission.is_baseline")
    aggregate = serializers.FloatField(source="score.aggregate")
    aggregate_ci = serializers.ListField(
        child=serializers.FloatField(allow_null=True),
        min_length=2,
        max_length=2,
        help_text="95% interval [low, high] from the timing spread (null when unknown).",
    )
    real_pass_rate = serializers.FloatField(source="score.real_pass_rate")
    apparent_pass_rate = serializers.FloatField(source="score.apparent_pass_rate")
    fallback_rate = serializers.FloatField(source="score.fallback_rate")
    geomean_speedup_eager = serializers.FloatField(
        source="score.geomean_speedup_eager", allow_null=True
    )
    geomean_speedup_compile = serializers.FloatField(
        source="score.geomean_speedup_compile",
        allow_null=True,
        help_text="Geometric-mean speedup over the torch.compile baseline of this board "
        "(null until one is published).",
    )
    operator_scores = serializers.DictField(
        source="score.operator_scores",
        child=serializers.FloatField(),
        help_text="Operator slug -> operator score (0..1 of the roofline, weighted).",
    )
    published_at = serializers.DateTimeField(source="score.published_at")


class BoardPageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    suite = serializers.CharField()
    hardware = serializers.CharField()
    operators = serializers.ListField(
        child=serializers.CharField(), help_text="Operator slugs, most important first."
    )
    results = BoardRowSerializer(many=True)


def _board_row(rank: int, score: Score) -> dict[str, Any]:
    return {
        "rank": rank,
        "score": score,
        "aggregate_ci": [score.aggregate_ci_low, score.aggregate_ci_high],
    }


class LeaderboardApi(APIView):
    """One board: the published public scores of a (suite version, hardware), best first."""

    pagination_class = StandardPagination

    @extend_schema(
        operation_id="board_list",
        summary="Board rows for one suite version and hardware profile",
        parameters=[
            OpenApiParameter("suite", str, description="Suite slug; default: the site's."),
            OpenApiParameter("hardware", str, description="Hardware slug; default: the site's."),
            OpenApiParameter("page", int),
            OpenApiParameter("page_size", int, description="At most 200."),
        ],
        responses={200: BoardPageSerializer, 404: NOT_FOUND},
        tags=["board"],
    )
    def get(self, request: Request) -> Response:
        # The same for every reader (the board lists public rows only, whoever asks): built
        # once per generation and shared; authentication and throttling still run per request.
        where = hashlib.sha256(request.build_absolute_uri().encode()).hexdigest()
        return shared_answer(request, f"api-board:{where}", lambda: self._board_body(request))

    def _board_body(self, request: Request) -> dict[str, Any] | Response:
        suite = catalogue_selectors.suite_version_pick(slug=request.query_params.get("suite"))
        hardware = catalogue_selectors.hardware_pick(slug=request.query_params.get("hardware"))
        if suite is None or hardware is None:
            what = "suite version" if suite is None else "hardware profile"
            return Response({"detail": f"No such published {what}.", "code": "not_found"}, 404)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(
            selectors.leaderboard_rows(suite=suite, hardware=hardware), request, view=self
        )
        first_rank = (paginator.page.number - 1) * paginator.page.paginator.per_page + 1
        rows = [_board_row(first_rank + i, score) for i, score in enumerate(page)]
        listed = paginator.get_paginated_response(BoardRowSerializer(rows, many=True).data).data
        return {
            "count": listed["count"],
            "next": listed["next"],
            "previous": listed["previous"],
            "suite": suite.slug,
            "hardware": hardware.slug,
            "operators": [
                row.operator.slug for row in catalogue_selectors.suite_operators(suite=suite)
            ],
            "results": listed["results"],
        }


def _published_suite(slug: str) -> SuiteVersion:
    suite = catalogue_selectors.suite_version_pick(slug=slug) if slug else None
    if suite is None:
        raise Http404
    return suite


@extend_schema(tags=["catalogue"])
class SuiteVersionListApi(ListAPIView):
    """Published suite versions."""

    serializer_class = SuiteVersionSerializer
    pagination_class = StandardPagination

    def get_queryset(self) -> QuerySet[SuiteVersion]:
        return catalogue_selectors.suite_versions_published()


@extend_schema(tags=["catalogue"], responses={200: SuiteVersionDetailSerializer, 404: NOT_FOUND})
class SuiteVersionDetailApi(RetrieveAPIView):
    """A published suite version with its operators (importance, dtype, phase)."""

    serializer_class = SuiteVersionDetailSerializer

    def get_object(self) -> SuiteVersion:
        suite = _published_suite(self.kwargs["slug"])
        suite.public_shapes = suite.shapes.filter(visibility=Shape.Visibility.PUBLIC).count()
        return suite


@extend_schema(
    tags=["catalogue"],
    parameters=[OpenApiParameter("operator", str, description="Only this operator's shapes.")],
    responses={200: ShapeSerializer(many=True), 404: NOT_FOUND},
)
class SuiteVersionShapesApi(ListAPIView):
    """The public shapes of a published suite version (hidden shapes are never listed)."""

    serializer_class = ShapeSerializer
    pagination_class = StandardPagination

    def get_queryset(self) -> QuerySet[Shape]:
        suite = _published_suite(self.kwargs["slug"])
        shapes = suite.shapes.filter(visibility=Shape.Visibility.PUBLIC).select_related("operator")
        operator = self.request.query_params.get("operator")
        if operator:
            shapes = shapes.filter(operator__slug=operator)
        return shapes.order_by("operator__slug", "pk")


@extend_schema(tags=["catalogue"])
class HardwareProfileListApi(ListAPIView):
    """Enabled hardware profiles (one board per suite version and profile)."""

    serializer_class = HardwareProfileSerializer
    pagination_class = StandardPagination

    def get_queryset(self) -> QuerySet[HardwareProfile]:
        return HardwareProfile.objects.filter(enabled=True).order_by("name")


@extend_schema(tags=["catalogue"], responses={200: HardwareProfileSerializer, 404: NOT_FOUND})
class HardwareProfileDetailApi(RetrieveAPIView):
    serializer_class = HardwareProfileSerializer

    def get_object(self) -> HardwareProfile:
        return get_object_or_404(HardwareProfile, slug=self.kwargs["slug"], enabled=True)


class ComparedSubmissionSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    owner = serializers.CharField()
    status = serializers.CharField()
    is_baseline = serializers.BooleanField()
    aggregate = serializers.FloatField(allow_null=True, help_text="fraction of the roofline")


class ComparedOperatorSerializer(serializers.Serializer):
    operator = serializers.CharField()
    importance = serializers.FloatField()
    scores = serializers.DictField(
        child=serializers.FloatField(allow_null=True), help_text="submission id -> score"
    )
    status = serializers.DictField(child=serializers.CharField())
    delta = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        help_text="submission id -> its score minus the first submission's",
    )


class ComparedShapeSerializer(serializers.Serializer):
    operator = serializers.CharField()
    shape_id = serializers.CharField()
    weight = serializers.FloatField()
    status = serializers.DictField(child=serializers.CharField())
    time_ms = serializers.DictField(child=serializers.FloatField(allow_null=True))
    roofline_fraction = serializers.DictField(child=serializers.FloatField(allow_null=True))
    speedup_over_first = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        help_text="submission id -> the first submission's time over its time",
    )
    status_changed = serializers.BooleanField()


class ComparisonSerializer(serializers.Serializer):
    submissions = ComparedSubmissionSerializer(many=True)
    suite = serializers.CharField()
    operators = ComparedOperatorSerializer(many=True)
    shapes = ComparedShapeSerializer(many=True)
    shapes_changed_status = serializers.IntegerField()


class CompareApi(APIView):
    @extend_schema(
        operation_id="compare",
        summary="Compare submissions of one suite version: per-operator scores and deltas, "
        "per-shape statuses, times and speedups over the first",
        parameters=[
            OpenApiParameter(
                "submissions",
                str,
                required=True,
                description="Comma-separated ids, the first the one the others are "
                "measured against (e.g. `12,15`); baselines are submissions too.",
            )
        ],
        responses={200: ComparisonSerializer, 400: ErrorSerializer, 404: ErrorSerializer},
        tags=["leaderboard"],
    )
    def get(self, request: Request) -> Response:
        raw = request.query_params.get("submissions", "")
        try:
            ids = [int(part) for part in raw.split(",") if part.strip()]
        except ValueError:
            return error_response(
                detail="submissions: comma-separated submission ids, e.g. 12,15",
                code="compare:bad-ids",
                status=400,
            )
        # Who may see which, from a narrow query (the whole rows, the suite's definition
        # among them, are loaded only to build the comparison, not to serve its copy).
        visible = (
            submissions_visible_to(user=request.user)
            .select_related(None)
            .only("pk", "visibility", "hidden", "status")
            .in_bulk(ids)
        )
        missing = [pk for pk in ids if pk not in visible]
        if missing:
            raise Http404(f"No submission {missing[0]} visible to you.")

        def body() -> dict[str, Any]:
            loaded = submissions_visible_to(user=request.user).in_bulk(ids)
            compared = [loaded[pk] for pk in ids]
            return ComparisonSerializer(
                submissions_compare_shared(submissions=compared, user=request.user)
            ).data

        try:
            if comparison_shareable(submissions=list(visible.values()), user=request.user):
                return shared_answer(request, "api-compare:" + ",".join(map(str, ids)), body)
            return Response(body())
        except ComparisonError as error:
            return error_response(detail=str(error), code="compare:not-comparable", status=400)
