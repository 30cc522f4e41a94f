"""REST API for submitting bundles and following them (token or session authentication)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from leaderboard.models import HardwareProfile, SuiteVersion

from . import selectors, services
from .models import Submission


class SubmissionSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username")
    suite = serializers.CharField(source="suite_version.slug")
    hardware = serializers.CharField(source="hardware.slug")
    error = serializers.SerializerMethodField()
    progress = serializers.SerializerMethodField()
    scores = serializers.SerializerMethodField()

    class Meta:
        model = Submission
        fields = [
            "id", "title", "owner", "kind", "visibility", "suite", "hardware", "status",
            "error", "progress", "scores", "dsl", "model_name", "agent_name", "notes",
            "upload_name", "upload_size", "manifest", "created_at",
        ]  # fmt: skip

    def get_error(self, submission: Submission) -> dict | None:
        if not submission.error_code:
            return None
        return {"code": submission.error_code, "message": submission.error_message}

    def get_progress(self, submission: Submission) -> dict:
        progress = selectors.submission_progress(submission=submission)
        return {key: progress[key] for key in ("shapes_done", "shapes_total", "percent", "final")}

    def get_scores(self, submission: Submission) -> dict | None:
        run = selectors.submission_latest_run(submission=submission)
        if run is None or not run.results:
            return None
        return run.results.get("scores")


class SubmissionCreateSerializer(serializers.Serializer):
    bundle = serializers.FileField(allow_empty_file=True)
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


class SubmissionListCreateApi(APIView):
    parser_classes = [MultiPartParser, FormParser]

    def get_permissions(self):
        return [IsAuthenticated()] if self.request.method == "POST" else []

    def get(self, request: Request) -> Response:
        queryset = selectors.submissions_visible_to(user=request.user)
        if request.query_params.get("mine") and request.user.is_authenticated:
            queryset = queryset.filter(owner=request.user)
        page = queryset[:100]
        return Response({"results": SubmissionSerializer(page, many=True).data})

    def post(self, request: Request) -> Response:
        form = SubmissionCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
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
        body = SubmissionSerializer(submission).data
        code = (
            status.HTTP_422_UNPROCESSABLE_ENTITY
            if submission.status == Submission.Status.REJECTED
            else status.HTTP_201_CREATED
        )
        return Response(body, status=code)


class SubmissionDetailApi(APIView):
    def get(self, request: Request, pk: int) -> Response:
        submission = get_object_or_404(selectors.submissions_visible_to(user=request.user), pk=pk)
        return Response(SubmissionSerializer(submission).data)
