from django.urls import path

from . import views

app_name = "submissions"

urlpatterns = [
    path("new/", views.submission_new, name="new"),
    path("mine/", views.submission_mine, name="mine"),
    path("<int:pk>/", views.submission_detail, name="detail"),
    path("<int:pk>/progress.json", views.submission_progress, name="progress"),
    path("<int:pk>/download/", views.submission_download, name="download"),
    path("<int:pk>/results.<str:fmt>", views.submission_results_download, name="results-download"),
]
