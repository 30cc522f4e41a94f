"""Public, read-only REST API of the board and the catalogue.

Every list is paginated (``?page=``, ``?page_size=``). The board rows come from
``selectors.board``, the one ranking selector the pages and the downloads use too. Only published
suite versions, enabled hardware profiles and public shapes are served: hidden shapes are
scored but never shown.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
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
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import APIView

from atrex_site.api import units
from atrex_site.api.errors import ErrorSerializer, error_response
from atrex_site.api.pagination import StandardPagination
from atrex_site.api.shared import shared_answer
from catalogue import selectors as catalogue_selectors
from catalogue.models import HardwareProfile, Shape, SuiteOperator, SuiteVersion
from submissions import querysets

from . import selectors
from .comparison import (
    ComparisonError,
    comparison_for,
    comparison_ids_parse,
    comparison_shareable,
    comparison_submissions,
    submissions_compare,
)

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
    rank = serializers.IntegerField(
        source="row.rank",
        allow_null=True,
        help_text="1 = best aggregate on this board; tied rows share a rank (see `tied`); "
        "null for a baseline (listed at its score's place, never ranked).",
    )
    tied = serializers.BooleanField(
        source="row.tied",
        help_text="True when the row cannot be told apart from its tie group's leader "
        "(overlapping 95% intervals, or within the board's noise floor); shown as =rank.",
    )
    submission = serializers.IntegerField(source="score.submission_id")
    title = serializers.CharField(source="score.submission.title")
    owner = serializers.CharField(source="score.submission.owner.username")
    kind = serializers.CharField(source="score.submission.kind")
    dsl = serializers.CharField(source="score.submission.dsl")
    baseline = serializers.BooleanField(source="score.submission.is_baseline")
    aggregate = serializers.FloatField(source="score.aggregate", help_text=units.AGGREGATE)
    aggregate_ci = serializers.ListField(
        child=serializers.FloatField(allow_null=True),
        min_length=2,
        max_length=2,
        help_text=units.AGGREGATE_CI,
    )
    real_pass_rate = serializers.FloatField(
        source="score.real_pass_rate", help_text=units.REAL_PASS_RATE
    )
    apparent_pass_rate = serializers.FloatField(
        source="score.apparent_pass_rate", help_text=units.APPARENT_PASS_RATE
    )
    fallback_rate = serializers.FloatField(
        source="score.fallback_rate", help_text=units.FALLBACK_RATE
    )
    geomean_speedup_eager = serializers.FloatField(
        source="score.geomean_speedup_eager", allow_null=True, help_text=units.SPEEDUP_EAGER
    )
    geomean_speedup_compile = serializers.FloatField(
        source="score.geomean_speedup_compile",
        allow_null=True,
        help_text="Geometric-mean speedup over the torch.compile baseline of this board "
        "(null until one is published), a ratio.",
    )
    operator_scores = serializers.DictField(
        source="score.operator_scores",
        child=serializers.FloatField(),
        help_text="Operator slug -> operator score, a fraction of the roofline 0..1.",
    )
    operator_verdicts = serializers.DictField(
        source="score.operator_verdicts",
        child=serializers.CharField(),
        help_text="Operator slug -> per-operator verdict (pass, partial, incorrect, fallback, "
        "failed; docs/scoring.md); an incorrect operator scores 0.",
    )
    shapes_passed_apparent = serializers.IntegerField(
        source="score.shapes_passed_apparent",
        allow_null=True,
        help_text="Shapes whose status is pass (per shape).",
    )
    shapes_passed_real = serializers.IntegerField(
        source="score.shapes_passed_real",
        allow_null=True,
        help_text="Of those, the shapes of operators that returned no wrong result (per "
        "operator); null on rows published before harness 0.3.0.",
    )
    shapes_total = serializers.IntegerField(source="score.shapes_total", allow_null=True)
    published_at = serializers.DateTimeField(source="score.published_at")


class BoardPageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    suite = serializers.CharField()
    hardware = serializers.CharField()
    view = serializers.ChoiceField(
        choices=list(selectors.BOARD_VIEWS),
        help_text="best: each submitter's best row (the default); all: every submission.",
    )
    sort = serializers.CharField(help_text="The order of the rows (never of the ranks).")
    noise_floor = serializers.FloatField(
        help_text="Two rows closer than this share of the better one's aggregate are a tie "
        "(the run-to-run noise of this board's hardware; docs/scoring.md)."
    )
    operators = serializers.ListField(
        child=serializers.CharField(), help_text="Operator slugs, most important first."
    )
    results = BoardRowSerializer(many=True)


def _board_row(row: selectors.BoardRow) -> dict[str, Any]:
    score = row.score
    return {
        "row": row,
        "score": score,
        "aggregate_ci": [score.aggregate_ci_low, score.aggregate_ci_high],
    }


class LeaderboardApi(APIView):
    """One board: the published public scores of a (suite version, hardware), ranked, from
    ``selectors.board``, the selector the page and the downloads read too."""

    pagination_class = StandardPagination

    @extend_schema(
        operation_id="board_list",
        summary="Board rows for one suite version and hardware profile",
        parameters=[
            OpenApiParameter("suite", str, description="Suite slug; default: the site's."),
            OpenApiParameter("hardware", str, description="Hardware slug; default: the site's."),
            OpenApiParameter(
                "view",
                str,
                enum=list(selectors.BOARD_VIEWS),
                description="best (default): each submitter's best result, ranked among "
                "those; all: every submission. Baselines are listed in both, unranked.",
            ),
            OpenApiParameter(
                "sort",
                str,
                description="Row order: `aggregate`, `real_pass_rate`, `apparent_pass_rate`, "
                "`fallback_rate`, `speedup`, `speedup_compile`, `date`, `submission`, `kind`, "
                "`dsl` or `op:<slug>` (an operator's score); a leading `-` for high to low. "
                "Default `-aggregate`. The ranks stay the score's.",
            ),
            OpenApiParameter("page", int),
            OpenApiParameter("page_size", int, description="At most 200."),
        ],
        responses={200: BoardPageSerializer, 404: NOT_FOUND},
        tags=["board"],
    )
    def get(self, request: Request) -> Response:
        # The same for every reader (the board lists public rows only, whoever asks): built
        # once per generation and shared; authentication and throttling still run per request.
        return shared_answer(request, lambda: self._board_body(request))

    def _board_body(self, request: Request) -> dict[str, Any] | Response:
        suite = catalogue_selectors.suite_version_pick(slug=request.query_params.get("suite"))
        hardware = catalogue_selectors.hardware_pick(slug=request.query_params.get("hardware"))
        if suite is None or hardware is None:
            what = "suite version" if suite is None else "hardware profile"
            return Response({"detail": f"No such published {what}.", "code": "not_found"}, 404)
        operators = [row.operator.slug for row in catalogue_selectors.suite_operators(suite=suite)]
        board = selectors.board(
            suite=suite,
            hardware=hardware,
            view=request.query_params.get("view"),
            sort=request.query_params.get("sort"),
            operators=operators,
            page=request.query_params.get("page"),
            per_page=self.pagination_class().get_page_size(request),
        )
        url, page = request.build_absolute_uri(), board.page
        return {
            "count": board.count,
            "next": replace_query_param(url, "page", page.next_page_number())
            if page is not None and page.has_next()
            else None,
            "previous": replace_query_param(url, "page", page.previous_page_number())
            if page is not None and page.has_previous()
            else None,
            "suite": suite.slug,
            "hardware": hardware.slug,
            "view": board.view,
            "sort": board.sort,
            "noise_floor": board.noise_floor.relative,
            "operators": operators,
            "results": BoardRowSerializer([_board_row(row) for row in board.rows], many=True).data,
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
    aggregate = serializers.FloatField(allow_null=True, help_text=units.AGGREGATE)
    speedup_over_first = serializers.FloatField(
        allow_null=True,
        help_text="geometric mean of the first submission's time over this one's at the "
        "shapes both answered correctly (pass or fallback); null for the first",
    )


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
    speedup_over_first = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        help_text="submission id -> geometric mean of the first's time over its time at the "
        "operator's shapes both answered correctly (pass or fallback); null when none",
    )
    speedup_shapes = serializers.DictField(
        child=serializers.IntegerField(), help_text="submission id -> shapes that speedup counts"
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
    hardware = serializers.CharField()
    operators = ComparedOperatorSerializer(many=True)
    shapes = ComparedShapeSerializer(many=True)
    shapes_changed_status = serializers.IntegerField()


class CompareApi(APIView):
    @extend_schema(
        operation_id="compare",
        summary="Compare submissions of one suite version and hardware: per-operator scores, "
        "deltas and speedups, per-shape statuses, times and speedups over the first",
        parameters=[
            OpenApiParameter(
                "submissions",
                str,
                required=True,
                description="Comma-separated ids (2 to 8), the first the one the others are "
                "measured against (e.g. `12,15`); baselines are submissions too. Published "
                "submissions, and your own.",
            )
        ],
        responses={200: ComparisonSerializer, 400: ErrorSerializer, 404: ErrorSerializer},
        tags=["leaderboard"],
    )
    def get(self, request: Request) -> Response:
        try:
            ids = comparison_ids_parse(request.query_params.getlist("submissions"))
        except ComparisonError as error:
            return error_response(detail=str(error), code=error.code, status=error.status)
        if querysets.is_staff(request.user):  # staff see hidden shapes: never shared
            try:
                body = comparison_for(ids=ids, user=request.user)
            except ComparisonError as error:
                return error_response(detail=str(error), code=error.code, status=error.status)
            return Response(ComparisonSerializer(body).data)
        # The rendered answer is shared only where it is the same for everyone (every
        # submission public, published and not hidden: comparison_shareable), and a change
        # to any of them bumps the board's generation, which retires it; so a copy may be
        # served to any reader without asking again whether they may see them.
        return shared_answer(request, lambda: _comparison_body(ids=ids, user=request.user))


def _comparison_body(*, ids: list[int], user: Any) -> dict[str, Any] | Response:
    """The serialised comparison when it may be shared, else this reader's answer (their
    own submissions in it, or an error) as a response, which is not shared."""
    try:
        submissions = comparison_submissions(ids=ids, user=user)
        if not comparison_shareable(submissions=submissions, user=user):
            body = submissions_compare(submissions=submissions, user=user)
            return Response(ComparisonSerializer(body).data)
        body = submissions_compare(submissions=submissions, user=AnonymousUser())
    except ComparisonError as error:
        return error_response(detail=str(error), code=error.code, status=error.status)
    return ComparisonSerializer(body).data
