from django.contrib import admin

from .models import HardwareProfile, Operator, Score, Shape, SuiteOperator, SuiteVersion


@admin.register(HardwareProfile)
class HardwareProfileAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "device_kind", "hbm_bytes_per_s", "enabled"]


@admin.register(Operator)
class OperatorAdmin(admin.ModelAdmin):
    list_display = ["slug", "atrex_id", "dtype", "phase", "enabled"]
    search_fields = ["slug", "atrex_id"]


class SuiteOperatorInline(admin.TabularInline):
    model = SuiteOperator
    extra = 0


@admin.register(SuiteVersion)
class SuiteVersionAdmin(admin.ModelAdmin):
    list_display = ["name", "version", "status", "content_hash", "published_at"]
    readonly_fields = ["content_hash", "definition", "created_at"]
    inlines = [SuiteOperatorInline]


@admin.register(Shape)
class ShapeAdmin(admin.ModelAdmin):
    list_display = ["suite_version", "operator", "shape_id", "weight", "visibility", "smoke"]
    list_filter = ["suite_version", "operator", "visibility", "smoke"]


@admin.register(Score)
class ScoreAdmin(admin.ModelAdmin):
    list_display = ["submission", "suite_version", "hardware", "aggregate", "published_at"]
    list_filter = ["suite_version", "hardware"]
