from django.urls import path

from atrex_site.page_cache import shared_page

from . import views

app_name = "submissions"

urlpatterns = [
    path("new/", views.submission_new, name="new"),
    path("mine/", views.submission_mine, name="mine"),
    # Shared copies are built for an anonymous reader: a private or hidden submission
    # answers 404 there, which is never shared; its owner's page is built for them alone.
    path(
        "<int:pk>/",
        shared_page(views.submission_detail, personal=views.reader_owns_submission),
        name="detail",
    ),
    path("<int:pk>/progress.json", views.submission_progress, name="progress"),
    path("<int:pk>/cancel/", views.submission_cancel, name="cancel"),
    path("<int:pk>/download/", views.submission_download, name="download"),
    path(
        "<int:pk>/results.<str:fmt>",
        shared_page(views.submission_results_download, personal=views.reader_owns_submission),
        name="results-download",
    ),
]
