from django.urls import include, path

from . import staff_api, views
from .page_cache import cached_for_anonymous

app_name = "leaderboard"

# Staff-only curation API (this app is mounted at the site root, so these are /api/staff/...).
staff_patterns = [
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

urlpatterns = [
    path("", cached_for_anonymous(views.board), name="board"),
    path(
        "leaderboard.<str:fmt>", cached_for_anonymous(views.board_download), name="board-download"
    ),
    path("operators/<slug:slug>/", cached_for_anonymous(views.operator_detail), name="operator"),
    path("history/", cached_for_anonymous(views.history), name="history"),
    path("suites/<str:slug>/definition.json", views.suite_definition, name="suite-definition"),
    path("vendor/plotly.min.js", views.plotly_js, name="plotly-js"),
    path("api/staff/", include(staff_patterns)),
]
