from django.contrib import admin
from django.urls import include, path

from accounts import views as accounts_views

from .api.urls import urlpatterns as api_patterns

urlpatterns = [
    path("", include("leaderboard.urls")),
    path("api/staff/", include("catalogue.urls")),
    path("submissions/", include("submissions.urls")),
    path("agents/", include("agents.urls")),
    path("accounts/signup/", accounts_views.signup, name="signup"),
    path("accounts/login/", accounts_views.LockoutLoginView.as_view(), name="login"),
    path("accounts/", include("accounts.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include((api_patterns, "api"))),
    path("staff/fleet/", include("fleet.urls")),
    path("admin/", admin.site.urls),
]
