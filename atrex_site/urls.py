from django.contrib import admin
from django.urls import include, path

from leaderboard.api import LeaderboardApi
from submissions.api import SubmissionDetailApi, SubmissionListCreateApi

from . import accounts

api_patterns = [
    path("leaderboard/", LeaderboardApi.as_view(), name="leaderboard"),
    path("submissions/", SubmissionListCreateApi.as_view(), name="submissions"),
    path("submissions/<int:pk>/", SubmissionDetailApi.as_view(), name="submission"),
]

urlpatterns = [
    path("", include("leaderboard.urls")),
    path("submissions/", include("submissions.urls")),
    path("accounts/signup/", accounts.signup, name="signup"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include((api_patterns, "api"))),
    path("admin/", admin.site.urls),
]
