from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.templatetags.static import static
from django.urls import include, path

from accounts import views as accounts_views

from .api.urls import urlpatterns as api_patterns

# The admin's pages read "<page> · Atrex-Bench Portal admin" (templates/admin/base_site.html).
admin.site.site_title = "Atrex-Bench Portal admin"
admin.site.site_header = "Atrex-Bench Portal administration"


def favicon(request: HttpRequest) -> HttpResponse:
    """``/favicon.ico``, which browsers ask for on pages without a ``<link rel="icon">``
    (the admin, JSON views): the static icon."""
    response = HttpResponseRedirect(static("favicon.ico"))
    response["Cache-Control"] = "public, max-age=86400"
    return response


# The API first: Django tries the patterns in order, and the leaderboard's (mounted at "")
# are tried, one by one, for every path that they do not match. No pattern of one matches a
# path of another, so the order changes no answer.
urlpatterns = [
    path("favicon.ico", favicon, name="favicon"),
    path("api/staff/", include("catalogue.urls")),
    path("api/", include((api_patterns, "api"))),
    path("", include("leaderboard.urls")),
    path("submissions/", include("submissions.urls")),
    path("agents/", include("agents.urls")),
    path("accounts/signup/", accounts_views.signup, name="signup"),
    path("accounts/login/", accounts_views.LockoutLoginView.as_view(), name="login"),
    path("accounts/", include("accounts.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("staff/fleet/", include("fleet.urls")),
    path("admin/", admin.site.urls),
]
