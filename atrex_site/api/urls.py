"""The public API's routes, mounted at ``/api/`` (namespace ``api``), with the schema and
its documentation pages."""

from __future__ import annotations

from django.urls import path
from drf_spectacular.views import (
    SpectacularAPIView,
    SpectacularRedocView,
    SpectacularSwaggerSplitView,
)

from leaderboard import api as leaderboard_api
from submissions import api as submissions_api

from .shared import shared_api
from .tokens import TokenApi, TokenDetailApi

urlpatterns = [
    # The two answers shared by every reader: served from their copy before DRF runs.
    path("leaderboard/", shared_api(leaderboard_api.LeaderboardApi.as_view()), name="leaderboard"),
    path("compare/", shared_api(leaderboard_api.CompareApi.as_view()), name="compare"),
    path("suites/", leaderboard_api.SuiteVersionListApi.as_view(), name="suites"),
    path("suites/<str:slug>/", leaderboard_api.SuiteVersionDetailApi.as_view(), name="suite"),
    path(
        "suites/<str:slug>/shapes/",
        leaderboard_api.SuiteVersionShapesApi.as_view(),
        name="suite-shapes",
    ),
    path("hardware/", leaderboard_api.HardwareProfileListApi.as_view(), name="hardware-list"),
    path(
        "hardware/<slug:slug>/",
        leaderboard_api.HardwareProfileDetailApi.as_view(),
        name="hardware",
    ),
    path("submissions/", submissions_api.SubmissionListCreateApi.as_view(), name="submissions"),
    path("submissions/check/", submissions_api.BundleCheckApi.as_view(), name="submissions-check"),
    path("quota/", submissions_api.QuotaApi.as_view(), name="quota"),
    path("queues/", submissions_api.QueueListApi.as_view(), name="queues"),
    path("submissions/<int:pk>/", submissions_api.SubmissionDetailApi.as_view(), name="submission"),
    path(
        "submissions/<int:pk>/progress/",
        submissions_api.SubmissionProgressApi.as_view(),
        name="submission-progress",
    ),
    path(
        "submissions/<int:pk>/cancel/",
        submissions_api.SubmissionCancelApi.as_view(),
        name="submission-cancel",
    ),
    path(
        "submissions/<int:pk>/shapes/",
        submissions_api.SubmissionShapesApi.as_view(),
        name="submission-shapes",
    ),
    path("tokens/", TokenApi.as_view(), name="tokens"),
    path("tokens/<int:pk>/", TokenDetailApi.as_view(), name="token"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves its script from a URL of its own: no inline script (CSP).
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api:schema"), name="docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="api:schema"), name="redoc"),
]
