from django.contrib import admin
from django.urls import include, path

from . import accounts
from .api.urls import urlpatterns as api_patterns

urlpatterns = [
    path("", include("leaderboard.urls")),
    path("submissions/", include("submissions.urls")),
    path("accounts/signup/", accounts.signup, name="signup"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include((api_patterns, "api"))),
    path("admin/", admin.site.urls),
]
