from django.urls import path

from atrex_site.page_cache import cached_for_anonymous

from . import views

app_name = "submissions"

urlpatterns = [
    path("new/", views.submission_new, name="new"),
    path("mine/", views.submission_mine, name="mine"),
    # Public pages only: a private or hidden submission answers 404 to readers without
    # credentials, which is never cached.
    path("<int:pk>/", cached_for_anonymous(views.submission_detail), name="detail"),
    path("<int:pk>/progress.json", views.submission_progress, name="progress"),
    path("<int:pk>/cancel/", views.submission_cancel, name="cancel"),
    path("<int:pk>/download/", views.submission_download, name="download"),
    path(
        "<int:pk>/results.<str:fmt>",
        cached_for_anonymous(views.submission_results_download),
        name="results-download",
    ),
]
