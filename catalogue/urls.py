"""The staff-only curation API, mounted at /api/staff/ (``atrex_site.urls``)."""

from django.urls import path

from . import staff_api

app_name = "catalogue"

urlpatterns = [
    path("suite-versions/", staff_api.SuiteVersionListApi.as_view(), name="staff-suite-versions"),
    path(
        "suite-versions/<int:pk>/",
        staff_api.SuiteVersionDetailApi.as_view(),
        name="staff-suite-version",
    ),
    path(
        "suite-versions/<int:pk>/drafts/",
        staff_api.SuiteVersionDraftApi.as_view(),
        name="staff-suite-version-draft",
    ),
    path(
        "suite-versions/<int:pk>/diff/",
        staff_api.SuiteVersionDiffApi.as_view(),
        name="staff-suite-version-diff",
    ),
    path(
        "suite-versions/<int:pk>/publish/",
        staff_api.SuiteVersionPublishApi.as_view(),
        name="staff-suite-version-publish",
    ),
    path(
        "suite-versions/<int:pk>/shapes/",
        staff_api.SuiteVersionShapesApi.as_view(),
        name="staff-suite-version-shapes",
    ),
    path(
        "suite-versions/<int:pk>/operators/upload/",
        staff_api.SuiteVersionUploadApi.as_view(),
        name="staff-suite-version-upload",
    ),
    path("shapes/<int:pk>/", staff_api.ShapeApi.as_view(), name="staff-shape"),
    path(
        "suite-operators/<int:pk>/",
        staff_api.SuiteOperatorApi.as_view(),
        name="staff-suite-operator",
    ),
    path("hardware/<slug:slug>/", staff_api.HardwareProfileApi.as_view(), name="staff-hardware"),
]
