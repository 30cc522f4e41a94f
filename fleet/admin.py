"""The registry in the admin: read-only (workers write their own rows); the change list
links to the status page with queue depths."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from atrex_site import admin_figures

from .models import WorkerNode


@admin.register(WorkerNode)
class WorkerNodeAdmin(admin.ModelAdmin):
    list_display = [
        "name", "status", "hardware_profile", "gpu_name", "cuda_visible_devices",
        "last_heartbeat_at", "ceilings_status", "copy", "bf16_gemm",
    ]  # fmt: skip
    # The measured ceilings with SI prefixes instead of 17-digit floats.
    exclude = ["copy_bytes_per_s", "bf16_gemm_flops_per_s"]
    readonly_fields = ["copy", "bf16_gemm"]
    copy = admin_figures.si("copy_bytes_per_s", "B/s", "copy bandwidth")
    bf16_gemm = admin_figures.si("bf16_gemm_flops_per_s", "FLOP/s", "bf16 GEMM")
    list_filter = ["status", "hardware_profile", "ceilings_status"]
    search_fields = ["name", "hostname", "gpu_name"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
