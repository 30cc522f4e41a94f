"""Staff-only JSON API for curation (``/api/staff/...``): the admin's operations, over DRF.

Every write goes through ``catalogue.services``; a refused request answers 400 (409
for an attempt to change a published version) with ``{"detail", "problems"}``.
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from rest_framework.permissions import IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluator.upstream import UpstreamFormatError, read_operator_zip

from . import services
from .models import HardwareProfile, Shape, SuiteOperator, SuiteVersion


def _refused(error: services.CurationError) -> Response:
    status = 409 if isinstance(error, services.SuiteVersionImmutableError) else 400
    return Response({"detail": error.message, "problems": error.problems}, status=status)


def _version_data(version: SuiteVersion, *, detail: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": version.pk,
        "slug": version.slug,
        "name": version.name,
        "version": version.version,
        "status": version.status,
        "parent": version.parent_id,
        "content_hash": version.content_hash,
        "published_at": version.published_at,
    }
    if detail:
        data["operators"] = [
            {
                "id": row.pk,
                "operator": row.operator.slug,
                "importance": row.importance,
                "importance_raw": row.importance_raw,
                "enabled": row.enabled,
                "description": row.description,
                "uploaded": bool(row.sources),
            }
            for row in version.suite_operators.select_related("operator").order_by("operator__slug")
        ]
        data["shapes"] = [_shape_data(shape) for shape in version.shapes.select_related("operator")]
    return data


def _shape_data(shape: Shape) -> dict[str, Any]:
    return {
        "id": shape.pk,
        "operator": shape.operator.slug,
        "shape_id": shape.shape_id,
        **{field: getattr(shape, field) for field in services.SHAPE_EDITABLE},
    }


class StaffApi(APIView):
    permission_classes = [IsAdminUser]


class SuiteVersionListApi(StaffApi):
    def get(self, request: Request) -> Response:
        versions = SuiteVersion.objects.order_by("name", "-created_at")
        return Response({"results": [_version_data(v) for v in versions]})


class SuiteVersionDetailApi(StaffApi):
    def get(self, request: Request, pk: int) -> Response:
        return Response(_version_data(get_object_or_404(SuiteVersion, pk=pk), detail=True))


class SuiteVersionDraftApi(StaffApi):
    """POST ``{"version": "v1.1"}``: a draft copied from this version."""

    def post(self, request: Request, pk: int) -> Response:
        version = get_object_or_404(SuiteVersion, pk=pk)
        try:
            draft = services.suite_version_draft_create(
                from_version=version, version_label=str(request.data.get("version", ""))
            )
        except services.CurationError as error:
            return _refused(error)
        return Response(_version_data(draft), status=201)


class SuiteVersionDiffApi(StaffApi):
    """GET: the diff against the parent, or against ``?against=<id>``."""

    def get(self, request: Request, pk: int) -> Response:
        version = get_object_or_404(SuiteVersion, pk=pk)
        against_id = request.query_params.get("against")
        against = get_object_or_404(SuiteVersion, pk=against_id) if against_id else version.parent
        if against is None:
            return Response({"detail": f"{version.slug} has no parent; pass ?against=<id>."}, 400)
        return Response(services.suite_version_diff(draft=version, against=against))


class SuiteVersionPublishApi(StaffApi):
    def post(self, request: Request, pk: int) -> Response:
        version = get_object_or_404(SuiteVersion, pk=pk)
        try:
            published = services.suite_version_publish(draft=version, actor=request.user)
        except services.CurationError as error:
            return _refused(error)
        return Response(_version_data(published))


class SuiteVersionShapesApi(StaffApi):
    """POST a new shape to a draft: operator, shape_id, input_kwargs, w_flops, q_read, ..."""

    def post(self, request: Request, pk: int) -> Response:
        version = get_object_or_404(SuiteVersion, pk=pk)
        data = request.data
        allowed = (
            "init_kwargs",
            "weight",
            "visibility",
            "smoke",
            "enabled",
            "source",
            "description",
        )
        try:
            shape = services.shape_add(
                draft=version,
                operator=str(data.get("operator", "")),
                shape_id=str(data.get("shape_id", "")),
                input_kwargs=data.get("input_kwargs"),
                w_flops=data.get("w_flops"),
                q_read=data.get("q_read"),
                q_write=data.get("q_write"),
                **{key: data[key] for key in allowed if key in data},
            )
        except services.CurationError as error:
            return _refused(error)
        return Response(_shape_data(shape), status=201)


class SuiteVersionUploadApi(StaffApi):
    """POST multipart ``archive`` (zip of an upstream operator directory), optional ``slug``."""

    def post(self, request: Request, pk: int) -> Response:
        version = get_object_or_404(SuiteVersion, pk=pk)
        archive = request.FILES.get("archive")
        if archive is None:
            return Response(
                {"detail": "Send the operator's zip as 'archive'.", "problems": []}, 400
            )
        try:
            upload = read_operator_zip(
                archive.read(),
                source=f"upload {archive.name} by {request.user.get_username()}",
                slug=request.data.get("slug") or None,
            )
            row = services.operator_upload_add(draft=version, upload=upload)
        except UpstreamFormatError as error:
            return Response({"detail": "The upload is invalid.", "problems": error.problems}, 400)
        except services.CurationError as error:
            return _refused(error)
        return Response({"id": row.pk, "operator": row.operator.slug}, status=201)


class ShapeApi(StaffApi):
    def patch(self, request: Request, pk: int) -> Response:
        shape = get_object_or_404(Shape.objects.select_related("operator", "suite_version"), pk=pk)
        try:
            shape = services.shape_update(shape=shape, **dict(request.data))
        except services.CurationError as error:
            return _refused(error)
        return Response(_shape_data(shape))


class SuiteOperatorApi(StaffApi):
    def patch(self, request: Request, pk: int) -> Response:
        row = get_object_or_404(SuiteOperator.objects.select_related("operator"), pk=pk)
        unknown = sorted(set(request.data) - {"enabled", "description", "importance"})
        if unknown:
            return Response(
                {"detail": f"These fields cannot be edited: {', '.join(unknown)}.", "problems": []},
                400,
            )
        try:
            row = services.operator_update(suite_operator=row, **dict(request.data))
        except services.CurationError as error:
            return _refused(error)
        return Response(
            {"id": row.pk, "operator": row.operator.slug, "importance": row.importance,
             "enabled": row.enabled, "description": row.description}
        )  # fmt: skip


class HardwareProfileApi(StaffApi):
    def patch(self, request: Request, slug: str) -> Response:
        profile = get_object_or_404(HardwareProfile, slug=slug)
        try:
            profile = services.hardware_profile_update(profile=profile, **dict(request.data))
        except services.CurationError as error:
            return _refused(error)
        return Response(
            {"slug": profile.slug, "peak_flops": profile.peak_flops,
             "hbm_bytes_per_s": profile.hbm_bytes_per_s, "source": profile.source}
        )  # fmt: skip
