from django.urls import path

from . import views

app_name = "agents"

urlpatterns = [
    path("", views.endpoint_list, name="list"),
    path("new/", views.endpoint_new, name="new"),
    path("<int:pk>/", views.endpoint_detail, name="detail"),
    path("<int:pk>/test/", views.endpoint_test, name="test"),
    path("<int:pk>/secret/", views.endpoint_rotate, name="rotate"),
    path("<int:pk>/campaign/", views.campaign_new, name="campaign"),
]
