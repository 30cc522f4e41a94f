"""The registry in the admin: read-only (workers write their own rows); the change list
links to the status page with queue depths."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from .models import WorkerNode


@admin.register(WorkerNode)
class WorkerNodeAdmin(admin.ModelAdmin):
    list_display = [
        "name", "status", "hardware_profile", "gpu_name", "cuda_visible_devices",
        "last_heartbeat_at", "ceilings_status",
    ]  # fmt: skip
    list_filter = ["status", "hardware_profile", "ceilings_status"]
    search_fields = ["name", "hostname", "gpu_name"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
