from django.urls import path

from . import views

app_name = "fleet"

urlpatterns = [
    path("", views.fleet_status, name="status"),
    path("status.json", views.fleet_status_json, name="status-json"),
]
