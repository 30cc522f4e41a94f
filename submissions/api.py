"""REST API for submitting bundles and following them (token or session authentication).

``POST /api/submissions/`` answers 201 with the queued submission, or 422 with the
rejected one (kept, so its owner can see what was uploaded) and the reason in ``detail``
and ``code``. Visibility is ``selectors.submissions_visible_to``: private submissions are
served to their owner and to staff only, and answer 404 to anyone else.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.generics import ListAPIView
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from atrex_site.api import units
from atrex_site.api.errors import ErrorSerializer, ValidationErrorSerializer, error_response
from atrex_site.api.pagination import StandardPagination
from catalogue.models import HardwareProfile, SuiteVersion
from catalogue.selectors import without_suite_definition

from . import selectors, services
from .cancellation import NotCancellable, NotYours, submission_cancel
from .checks import bundle_check
from .models import EvaluationRun, OperatorResult, ShapeResult, StatusChange, Submission
from .queues import queue_states
from .quotas import QuotaExceeded, quota_status

NOT_FOUND = OpenApiResponse(ErrorSerializer, description="No such submission visible to you.")


class SubmissionErrorSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Stable code, e.g. bundle:missing-model.")
    message = serializers.CharField()


class ProgressSerializer(serializers.Serializer):
    shapes_done = serializers.IntegerField()
    shapes_total = serializers.IntegerField()
    percent = serializers.FloatField()
    final = serializers.BooleanField(help_text="True once the status will not change again.")


class ScoresSerializer(serializers.Serializer):
    """The ``scores`` block the evaluator's scoring writes (evaluator.scoring.summarize)."""

    aggregate = serializers.FloatField(help_text=units.AGGREGATE)
    aggregate_ci = serializers.ListField(
        child=serializers.FloatField(), allow_null=True, help_text=units.AGGREGATE_CI
    )
    apparent_pass_rate = serializers.FloatField(allow_null=True, help_text=units.APPARENT_PASS_RATE)
    real_pass_rate = serializers.FloatField(allow_null=True, help_text=units.REAL_PASS_RATE)
    fallback_rate = serializers.FloatField(allow_null=True, help_text=units.FALLBACK_RATE)
    geomean_speedup_eager = serializers.FloatField(allow_null=True, help_text=units.SPEEDUP_EAGER)
    fast_1 = serializers.FloatField(allow_null=True, help_text=units.FAST_1)
    shapes_total = serializers.IntegerField(allow_null=True)
    shapes_passed = serializers.IntegerField(
        allow_null=True, help_text="Apparent pass count: shapes whose status is pass."
    )
    shapes_passed_real = serializers.IntegerField(
        allow_null=True,
        required=False,
        help_text="Real pass count: passing shapes of operators that returned no wrong "
        "result on any shape (null for runs scored before harness 0.3.0).",
    )
    operators_incorrect = serializers.IntegerField(allow_null=True, required=False)
    operators_held = serializers.IntegerField(allow_null=True, required=False)


class OperatorResultSerializer(serializers.ModelSerializer):
    warnings = serializers.ListField(child=serializers.CharField())

    class Meta:
        model = OperatorResult
        fields = [
            "operator", "status", "verdict", "score", "importance", "error", "warnings",
            "shapes_total", "apparent_passes", "real_passes", "wrong_shapes", "hold_codes",
        ]  # fmt: skip
        extra_kwargs = {
            "score": {"help_text": units.OPERATOR_SCORE},
            "importance": {"help_text": units.IMPORTANCE},
        }


class ShapeResultSerializer(serializers.ModelSerializer):
    class Meta:
        model = ShapeResult
        fields = [
            "operator", "shape_id", "status", "weight", "time_ms", "time_spread_ms", "reps",
            "reference_time_ms", "t_sol_ms", "roofline_fraction", "speedup",
            "own_kernel_share", "max_abs_error", "error", "codes",
        ]  # fmt: skip
        extra_kwargs = {
            "weight": {"help_text": units.SHAPE_WEIGHT},
            "time_ms": {"help_text": units.TIME_MS},
            "time_spread_ms": {"help_text": units.TIME_SPREAD_MS},
            "reference_time_ms": {"help_text": units.REFERENCE_TIME_MS},
            "t_sol_ms": {"help_text": units.T_SOL_MS},
            "roofline_fraction": {"help_text": units.ROOFLINE_FRACTION},
            "speedup": {"help_text": units.SHAPE_SPEEDUP},
            "own_kernel_share": {"help_text": units.OWN_KERNEL_SHARE},
        }


class StatusChangeSerializer(serializers.ModelSerializer):
    class Meta:
        model = StatusChange
        fields = ["from_status", "to_status", "note", "at"]


def _latest_run(submission: Submission) -> EvaluationRun | None:
    """The latest run, from the list view's prefetch when there is one."""
    prefetched = getattr(submission, "latest_runs", None)
    if prefetched is not None:
        return prefetched[0] if prefetched else None
    return selectors.submission_latest_run(submission=submission)


class SubmissionSerializer(serializers.ModelSerializer):
    """A submission as lists show it: status, progress, error, aggregate."""

    owner = serializers.CharField(source="owner.username")
    suite = serializers.CharField(source="suite_version.slug")
    hardware = serializers.CharField(source="hardware.slug")
    error = serializers.SerializerMethodField()
    progress = serializers.SerializerMethodField()
    aggregate = serializers.SerializerMethodField()

    class Meta:
        model = Submission
        fields = [
            "id", "title", "owner", "kind", "visibility", "suite", "hardware", "status",
            "error", "progress", "aggregate", "dsl", "model_name", "agent_name", "notes",
            "is_baseline", "upload_name", "upload_size", "created_at",
        ]  # fmt: skip

    @extend_schema_field(SubmissionErrorSerializer(allow_null=True))
    def get_error(self, submission: Submission) -> dict[str, str] | None:
        if not submission.error_code:
            return None
        return {"code": submission.error_code, "message": submission.error_message}

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, submission: Submission) -> dict[str, Any]:
        run = _latest_run(submission)
        done = run.shapes_done if run else 0
        total = run.shapes_total if run else 0
        return {
            "shapes_done": done,
            "shapes_total": total,
            "percent": round(100.0 * done / total, 1) if total else 0.0,
            "final": submission.is_final,
        }

    def _withheld(self, submission: Submission) -> bool:
        """Held for review: nothing of it is published until staff release it (its owner
        and staff see its figures)."""
        request = self.context.get("request")
        return selectors.submission_results_withheld(
            submission=submission, user=getattr(request, "user", None)
        )

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_aggregate(self, submission: Submission) -> float | None:
        """The published aggregate (null until the submission is on the board, and while
        it is held for review, for all but its owner and staff)."""
        if self._withheld(submission):
            return None
        try:
            return submission.score.aggregate
        except Submission.score.RelatedObjectDoesNotExist:
            return None


class SubmissionDetailSerializer(SubmissionSerializer):
    """One submission: everything its page shows except the per-shape rows (paginated at
    ``/api/submissions/{id}/shapes/``)."""

    scores = serializers.SerializerMethodField()
    operators = serializers.SerializerMethodField()
    environment = serializers.SerializerMethodField()
    history = StatusChangeSerializer(many=True, read_only=True)

    class Meta(SubmissionSerializer.Meta):
        fields = [
            *SubmissionSerializer.Meta.fields,
            "manifest", "scores", "operators", "environment", "history",
        ]  # fmt: skip

    @extend_schema_field(ScoresSerializer(allow_null=True))
    def get_scores(self, submission: Submission) -> dict[str, Any] | None:
        if self._withheld(submission):
            return None
        run = _latest_run(submission)
        if run is None or not run.results or not run.results.get("scores"):
            return None
        return ScoresSerializer(run.results["scores"]).data

    @extend_schema_field(OperatorResultSerializer(many=True))
    def get_operators(self, submission: Submission) -> list[dict[str, Any]]:
        if self._withheld(submission):
            return []
        run = _latest_run(submission)
        if run is None:
            return []
        return OperatorResultSerializer(run.operator_results.all(), many=True).data

    @extend_schema_field(serializers.DictField(help_text="GPU, driver, torch/triton versions."))
    def get_environment(self, submission: Submission) -> dict[str, Any]:
        if self._withheld(submission):
            return {}
        run = _latest_run(submission)
        return (run.environment or {}) if run else {}

    def to_representation(self, instance: Submission) -> dict[str, Any]:
        data = super().to_representation(instance)
        if self._withheld(instance):
            # The hold's note names the operators, shapes and signs an admin reviews.
            for change in data.get("history") or []:
                change["note"] = ""
        return data


class SubmissionRejectedSerializer(SubmissionDetailSerializer):
    """A 422: the upload was kept and rejected; ``detail``/``code`` say why."""

    detail = serializers.CharField(source="error_message")
    code = serializers.CharField(source="error_code")

    class Meta(SubmissionDetailSerializer.Meta):
        fields = [*SubmissionDetailSerializer.Meta.fields, "detail", "code"]


class QueuePlaceSerializer(serializers.Serializer):
    position = serializers.IntegerField(help_text="1: the next run its hardware's workers take")
    workers_online = serializers.IntegerField(help_text="workers serving this hardware now")
    wait_s = serializers.FloatField(
        allow_null=True,
        help_text="estimated seconds until it starts, from the median wall time of the "
        "hardware's recent runs; null without a worker online or without any finished run",
    )
    note = serializers.CharField(help_text="the same in words, as the page shows it")


class SubmissionProgressSerializer(serializers.Serializer):
    """What a poller needs, cheaply."""

    queue = QueuePlaceSerializer(allow_null=True, help_text="while queued; null otherwise")

    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=Submission.Status.choices)
    status_display = serializers.CharField()
    final = serializers.BooleanField()
    shapes_done = serializers.IntegerField()
    shapes_total = serializers.IntegerField()
    percent = serializers.FloatField()
    error_code = serializers.CharField(allow_blank=True)
    error_message = serializers.CharField(allow_blank=True)


class SubmissionCreateSerializer(serializers.Serializer):
    bundle = serializers.FileField(
        allow_empty_file=True, help_text="`.zip`, `.tar.gz` or a single `<operator>.py`"
    )
    title = serializers.CharField(required=False, allow_blank=True, max_length=200)
    visibility = serializers.ChoiceField(
        choices=Submission.Visibility.choices, default=Submission.Visibility.PUBLIC
    )
    suite = serializers.CharField(required=False, help_text="Suite slug, e.g. atrex-bench-v0.1")
    hardware = serializers.SlugRelatedField(
        slug_field="slug", queryset=HardwareProfile.objects.filter(enabled=True), required=False
    )
    dsl = serializers.CharField(required=False, allow_blank=True, max_length=40)
    model_name = serializers.CharField(required=False, allow_blank=True, max_length=120)
    agent_name = serializers.CharField(required=False, allow_blank=True, max_length=120)
    notes = serializers.CharField(required=False, allow_blank=True)

    def validate_suite(self, value: str) -> SuiteVersion:
        for suite in SuiteVersion.objects.filter(status=SuiteVersion.Status.PUBLISHED):
            if suite.slug == value:
                return suite
        raise serializers.ValidationError(f"No published suite version is called {value!r}.")


def _visible(request: Request) -> QuerySet[Submission]:
    return selectors.submissions_visible_to(user=request.user)


class SubmissionListCreateApi(APIView):
    parser_classes = [MultiPartParser, FormParser]
    pagination_class = StandardPagination

    def get_permissions(self):
        return [IsAuthenticated()] if self.request.method == "POST" else []

    @extend_schema(
        operation_id="submissions_list",
        summary="Submissions visible to you (public ones, your own, all for staff)",
        parameters=[
            OpenApiParameter("mine", bool, description="Only your own submissions."),
            OpenApiParameter("status", str, enum=Submission.Status.values),
            OpenApiParameter("page", int),
            OpenApiParameter("page_size", int, description="At most 200."),
        ],
        responses={200: SubmissionSerializer(many=True)},
        tags=["submissions"],
    )
    def get(self, request: Request) -> Response:
        queryset = without_suite_definition(_visible(request).select_related("score"))
        if request.query_params.get("mine") in ("1", "true", "True") and (
            request.user.is_authenticated
        ):
            queryset = queryset.filter(owner=request.user)
        if request.query_params.get("status"):
            queryset = queryset.filter(status=request.query_params["status"])
        runs = EvaluationRun.objects.order_by("-attempt").only(
            "submission_id", "attempt", "shapes_done", "shapes_total"
        )
        queryset = queryset.prefetch_related(Prefetch("runs", runs, to_attr="latest_runs"))
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(queryset.order_by("-created_at", "-pk"), request, self)
        return paginator.get_paginated_response(SubmissionSerializer(page, many=True).data)

    @extend_schema(
        operation_id="submissions_create",
        summary="Upload a kernel bundle",
        request={"multipart/form-data": SubmissionCreateSerializer},
        responses={
            201: OpenApiResponse(SubmissionDetailSerializer, description="Accepted and queued."),
            400: OpenApiResponse(ValidationErrorSerializer, description="Bad form fields."),
            401: OpenApiResponse(ErrorSerializer, description="No or bad token."),
            422: OpenApiResponse(
                SubmissionRejectedSerializer,
                description="The bundle cannot be evaluated; it is kept as 'rejected'.",
            ),
            429: OpenApiResponse(
                ErrorSerializer,
                description="Over the owner's submission limits (quota:per-hour, "
                "quota:per-day, quota:active); nothing stored; see Retry-After.",
            ),
        },
        tags=["submissions"],
    )
    def post(self, request: Request) -> Response:
        form = SubmissionCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            submission = services.submission_create(
                owner=request.user,
                upload=data["bundle"],
                title=data.get("title", ""),
                visibility=data["visibility"],
                suite_version=data.get("suite"),
                hardware=data.get("hardware"),
                provenance=services.Provenance(
                    dsl=data.get("dsl", ""),
                    model_name=data.get("model_name", ""),
                    agent_name=data.get("agent_name", ""),
                    notes=data.get("notes", ""),
                ),
            )
        except QuotaExceeded as error:
            # 429: nothing stored; Retry-After says when the owner may submit again.
            response = error_response(detail=error.message, code=error.code, status=429)
            response["Retry-After"] = str(error.retry_after_s)
            return response
        if submission.status == Submission.Status.REJECTED:
            body = SubmissionRejectedSerializer(submission).data
            return Response(body, status=status.HTTP_422_UNPROCESSABLE_ENTITY)
        return Response(
            SubmissionDetailSerializer(submission, context={"request": request}).data,
            status=status.HTTP_201_CREATED,
        )


class SubmissionDetailApi(APIView):
    @extend_schema(
        operation_id="submissions_retrieve",
        summary="A submission: status, progress, scores, per-operator results, history",
        responses={200: SubmissionDetailSerializer, 404: NOT_FOUND},
        tags=["submissions"],
    )
    def get(self, request: Request, pk: int) -> Response:
        submission = get_object_or_404(_visible(request).select_related("score"), pk=pk)
        return Response(SubmissionDetailSerializer(submission, context={"request": request}).data)


class SubmissionProgressApi(APIView):
    @extend_schema(
        operation_id="submissions_progress",
        summary="Status and progress only (for polling)",
        responses={200: SubmissionProgressSerializer, 404: NOT_FOUND},
        tags=["submissions"],
    )
    def get(self, request: Request, pk: int) -> Response:
        submission = get_object_or_404(_visible(request), pk=pk)
        progress = selectors.submission_progress(submission=submission)
        return Response(SubmissionProgressSerializer(progress).data)


@extend_schema(
    summary="Per-shape results of a submission's latest run",
    parameters=[
        OpenApiParameter("operator", str, description="Only this operator's shapes."),
        OpenApiParameter("status", str, description="e.g. pass, fallback, incorrect."),
    ],
    responses={200: ShapeResultSerializer(many=True), 404: NOT_FOUND},
    tags=["submissions"],
)
class SubmissionShapesApi(ListAPIView):
    """Per-shape rows; rows of hidden shapes are shown to staff only."""

    serializer_class = ShapeResultSerializer
    pagination_class = StandardPagination

    def get_queryset(self) -> QuerySet[ShapeResult]:
        submission = get_object_or_404(_visible(self.request), pk=self.kwargs["pk"])
        run = selectors.submission_latest_run(submission=submission)
        if run is None or selectors.submission_results_withheld(
            submission=submission, user=self.request.user
        ):
            return ShapeResult.objects.none()
        rows = selectors.shape_results_visible_to(run=run, user=self.request.user)
        params = self.request.query_params
        if params.get("operator"):
            rows = rows.filter(operator=params["operator"])
        if params.get("status"):
            rows = rows.filter(status=params["status"])
        return rows.order_by("operator", "pk")


class QuotaWindowSerializer(serializers.Serializer):
    name = serializers.ChoiceField(choices=["per_hour", "per_day", "active"])
    limit = serializers.IntegerField(help_text="0: no limit")
    used = serializers.IntegerField(help_text="submissions counted in this window")
    left = serializers.IntegerField(allow_null=True, help_text="null when there is no limit")
    frees_at = serializers.DateTimeField(
        allow_null=True, help_text="when the next slot frees, if the window is full"
    )


class QuotaSerializer(serializers.Serializer):
    exempt = serializers.BooleanField(help_text="staff have no limits")
    windows = QuotaWindowSerializer(many=True)


class QuotaApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="quota_retrieve",
        summary="Your submission limits and what is left (rejected uploads, cancelled "
        "submissions and platform failures are not counted)",
        responses={200: QuotaSerializer, 401: OpenApiResponse(ErrorSerializer)},
        tags=["submissions"],
    )
    def get(self, request: Request) -> Response:
        return Response(QuotaSerializer(quota_status(owner=request.user)).data)


class SuiteFitSerializer(serializers.Serializer):
    suite = serializers.CharField()
    operators = serializers.ListField(child=serializers.CharField())
    suite_operators = serializers.IntegerField()


class BundleCheckSerializer(serializers.Serializer):
    ok = serializers.BooleanField(help_text="true: a submission of it would be queued")
    suite = serializers.CharField(help_text="the suite version checked against")
    filename = serializers.CharField(help_text="the uploaded file's name")
    code = serializers.CharField(
        help_text="the rejection code when not ok, e.g. bundle:syntax-error"
    )
    detail = serializers.CharField(help_text="what to fix, when not ok")
    operators = serializers.DictField(
        child=serializers.CharField(), help_text="operator -> file that would be evaluated"
    )
    missing = serializers.ListField(
        child=serializers.CharField(), help_text="the suite's operators the bundle lacks"
    )
    warnings = serializers.ListField(child=serializers.CharField())
    files = serializers.ListField(child=serializers.CharField())
    fits = SuiteFitSerializer(many=True, help_text="every published suite, best fit first")
    best_suite = serializers.CharField(help_text="the suite that would evaluate most of it")


class BundleCheckRequestSerializer(serializers.Serializer):
    bundle = serializers.FileField(
        allow_empty_file=True, help_text="`.zip`, `.tar.gz` or a single `<operator>.py`"
    )
    suite = serializers.CharField(
        required=False, help_text="Suite slug (default: the board's default suite)"
    )

    def validate_suite(self, value: str) -> SuiteVersion:
        return SubmissionCreateSerializer().validate_suite(value)


class BundleCheckApi(APIView):
    parser_classes = [MultiPartParser, FormParser]
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="submissions_check",
        summary="Check a bundle without submitting it (nothing stored, no quota, no worker)",
        request={"multipart/form-data": BundleCheckRequestSerializer},
        responses={
            200: OpenApiResponse(
                BundleCheckSerializer, description="The check ran; `ok` says if it passed."
            ),
            400: OpenApiResponse(ValidationErrorSerializer, description="Bad form fields."),
            401: OpenApiResponse(ErrorSerializer, description="No or bad token."),
        },
        tags=["submissions"],
    )
    def post(self, request: Request) -> Response:
        form = BundleCheckRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        result = bundle_check(
            upload=form.validated_data["bundle"], suite_version=form.validated_data.get("suite")
        )
        return Response(BundleCheckSerializer(result.to_dict()).data)


class QueueStateSerializer(serializers.Serializer):
    hardware = serializers.CharField()
    name = serializers.CharField()
    workers_online = serializers.IntegerField()
    serves = serializers.BooleanField(help_text="false: no worker online, submissions wait")
    waiting = serializers.IntegerField(help_text="runs queued, not yet taken")
    running = serializers.IntegerField()
    median_run_s = serializers.FloatField(allow_null=True)
    runs_measured = serializers.IntegerField(help_text="finished runs the median is taken over")
    new_wait_s = serializers.FloatField(
        allow_null=True, help_text="estimated seconds before a new submission would start"
    )


class QueueListApi(APIView):
    @extend_schema(
        operation_id="queues_list",
        summary="Each hardware's queue: workers online, runs waiting and running, the "
        "estimated wait of a new submission",
        responses={200: QueueStateSerializer(many=True)},
        tags=["submissions"],
    )
    def get(self, request: Request) -> Response:
        states = [state.to_dict() for state in queue_states()]
        return Response(QueueStateSerializer(states, many=True).data)


class SubmissionCancelApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="submissions_cancel",
        summary="Cancel your submission while it is received, queued or running (the worker "
        "stops its evaluation; the upload and history stay; the quota is refunded)",
        request=None,
        responses={
            200: SubmissionDetailSerializer,
            403: OpenApiResponse(ErrorSerializer, description="Not your submission."),
            404: NOT_FOUND,
            409: OpenApiResponse(ErrorSerializer, description="Finished or being scored."),
        },
        tags=["submissions"],
    )
    def post(self, request: Request, pk: int) -> Response:
        submission = get_object_or_404(_visible(request), pk=pk)
        try:
            submission_cancel(submission=submission, actor=request.user)
        except NotYours as error:
            return error_response(detail=error.message, code=error.code, status=403)
        except NotCancellable as error:
            return error_response(detail=error.message, code=error.code, status=409)
        submission.refresh_from_db()
        return Response(SubmissionDetailSerializer(submission, context={"request": request}).data)
