from django.contrib import admin

from .models import EvaluationRun, StatusChange, Submission


class StatusChangeInline(admin.TabularInline):
    model = StatusChange
    extra = 0
    readonly_fields = ["from_status", "to_status", "note", "at"]


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = ["pk", "title", "owner", "status", "visibility", "suite_version", "hardware"]
    list_filter = ["status", "visibility", "kind", "is_baseline"]
    search_fields = ["title", "owner__username"]
    # Status moves only through services (compare-and-set), never by editing the row.
    readonly_fields = ["status", "status_changed_at", "error_code", "error_message", "manifest"]
    inlines = [StatusChangeInline]


@admin.register(EvaluationRun)
class EvaluationRunAdmin(admin.ModelAdmin):
    list_display = [
        "pk",
        "submission",
        "attempt",
        "status",
        "worker",
        "shapes_done",
        "shapes_total",
    ]
    list_filter = ["status", "queue"]
    readonly_fields = ["results", "environment", "log_tail"]
