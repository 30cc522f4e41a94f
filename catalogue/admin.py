"""Admin for the catalogue: curation of drafts through the services, published versions
read-only, and pages for creating a draft, the diff against its parent, publishing and
adding an operator uploaded in the upstream format."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from atrex_site import admin_figures
from evaluator import figures
from evaluator.upstream import UpstreamFormatError, read_operator_zip

from . import selectors, services
from .models import HardwareProfile, Operator, Shape, SuiteOperator, SuiteVersion


class SuiteVersionListFilter(admin.RelatedFieldListFilter):
    """A list's filter by suite version, its choices read without each version's definition
    (the suite as JSON, 380 KB for v1, decoded once a version for its name otherwise)."""

    def field_choices(self, field: Any, request: HttpRequest, model_admin: Any) -> list:
        versions = SuiteVersion.objects.defer("definition")
        ordering = self.field_admin_ordering(field, request, model_admin)
        if ordering:  # else the model's own, as Django's filter orders them
            versions = versions.order_by(*ordering)
        return [(version.pk, str(version)) for version in versions]


def _report(request: HttpRequest, error: services.CurationError) -> None:
    """A refused curation request as admin messages: the summary, then each problem."""
    messages.error(request, error.message)
    for problem in error.problems:
        messages.error(request, problem)


# --------------------------------------------------------------------------- hardware


class HardwareProfileForm(forms.ModelForm):
    class Meta:
        model = HardwareProfile
        fields = ["slug", "name", "device_kind", *services.HARDWARE_EDITABLE]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        fields = {k: cleaned[k] for k in services.HARDWARE_EDITABLE if k in cleaned}
        for problem in services._hardware_problems(fields):
            self.add_error(None, problem)
        return cleaned


@admin.register(HardwareProfile)
class HardwareProfileAdmin(admin.ModelAdmin):
    form = HardwareProfileForm
    list_display = ["slug", "name", "device_kind", "bandwidth", "source", "enabled"]
    bandwidth = admin_figures.si("hbm_bytes_per_s", "B/s", "HBM bandwidth")
    list_filter = ["device_kind", "enabled"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["slug", "device_kind"] if obj is not None else []

    def save_model(
        self, request: HttpRequest, obj: HardwareProfile, form: Any, change: bool
    ) -> None:
        if not change:
            super().save_model(request, obj, form, change)
            return
        fields = {
            k: form.cleaned_data[k] for k in services.HARDWARE_EDITABLE if k in form.cleaned_data
        }
        services.hardware_profile_update(profile=obj, **fields)


# --------------------------------------------------------------------------- operators


@admin.register(Operator)
class OperatorAdmin(admin.ModelAdmin):
    list_display = ["slug", "atrex_id", "dtype", "phase", "enabled"]
    list_filter = ["dtype", "phase", "enabled"]
    search_fields = ["slug", "atrex_id"]
    readonly_fields = ["slug", "atrex_id", "dtype", "phase"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Operators come from suite imports and uploads (with their shapes), never bare.
        return False


def _published(obj: Any) -> bool:
    version = obj if isinstance(obj, SuiteVersion) else getattr(obj, "suite_version", None)
    return bool(version is not None and version.is_published)


class SuiteOperatorInline(admin.TabularInline):
    model = SuiteOperator
    extra = 0
    fields = [
        "operator", "importance", "published_importance", "enabled", "description", "uploaded",
    ]  # fmt: skip
    readonly_fields = ["operator", "published_importance", "uploaded"]
    published_importance = admin_figures.sig("importance_raw", "importance as published")
    can_delete = False

    @admin.display(boolean=True, description="uploaded sources")
    def uploaded(self, obj: SuiteOperator) -> bool:
        return bool(obj.sources)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_change_permission(request, obj) and not _published(obj)

    def get_queryset(self, request: HttpRequest) -> QuerySet[SuiteOperator]:
        # Each row's name ("rms_norm in atrex-bench v1") reads its suite version: joined,
        # without the definition (0.3 s of v1's page when each of 30 rows decoded it).
        return selectors.without_suite_definition(
            super().get_queryset(request).select_related("operator", "suite_version")
        )


# --------------------------------------------------------------------------- suite versions


class DraftForm(forms.Form):
    version_label = forms.CharField(max_length=40, help_text="e.g. v1.1")


class UploadOperatorForm(forms.Form):
    archive = forms.FileField(
        help_text="A .zip of one operator directory in the upstream format: reference.py, "
        "input.py, shapes.json, roofline.json, metadata.json."
    )
    slug = forms.SlugField(
        required=False, help_text="The operator's slug (default: the zip's folder name)."
    )


@dataclass(frozen=True)
class ShapeRow:
    """A shape as the suite version's page lists it, its figures written as the pages write
    them."""

    pk: int
    operator: str
    operator_pk: int
    shape_id: str
    weight: str
    visibility: str
    enabled: bool
    smoke: bool
    read: str
    written: str

    @classmethod
    def of(cls, shape: Shape) -> ShapeRow:
        return cls(
            pk=shape.pk,
            operator=shape.operator.slug,
            operator_pk=shape.operator_id,
            shape_id=shape.shape_id,
            weight=figures.significant(shape.weight),
            visibility=shape.get_visibility_display(),
            enabled=shape.enabled,
            smoke=shape.smoke,
            read=figures.si(shape.q_read, "B"),
            written=figures.si(shape.q_write, "B"),
        )


@admin.register(SuiteVersion)
class SuiteVersionAdmin(admin.ModelAdmin):
    list_display = ["name", "version", "status", "parent", "content_hash", "published_at"]
    list_filter = ["status", "name"]
    fields = [
        "name",
        "version",
        "status",
        "description",
        "parent",
        "content_hash",
        "threshold_own_share",
        "created_at",
        "published_at",
        "published_by",
    ]
    inlines = [SuiteOperatorInline]
    actions = ["create_draft", "show_diff", "publish"]
    change_form_template = "admin/catalogue/suiteversion/change_form.html"

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        editable = {"description"} if obj is not None and not obj.is_published else set()
        return [name for name in self.fields if name not in editable]

    def get_queryset(self, request: HttpRequest) -> QuerySet[SuiteVersion]:
        # The list and a version's page show its name and figures, never its definition
        # (the suite as JSON, 380 KB for v1), nor its parent's: read where used.
        return (
            super()
            .get_queryset(request)
            .select_related("parent")
            .defer("definition", "parent__definition")
        )

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: SuiteVersion | None = None,
    ) -> HttpResponse:
        # The shapes, read-only here, as one table (change_form.html), each linking to its
        # own page: as an inline formset of 506 read-only forms v1's page took 0.8-1.3 s.
        if obj is not None:
            context["shape_enabled_help"] = Shape._meta.get_field("enabled").help_text
            context["shape_rows"] = [
                ShapeRow.of(shape)
                for shape in selectors.suite_version_shapes(suite_version_id=obj.pk)
            ]
        return super().render_change_form(request, context, add, change, form_url, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Versions come from imports (seed_suite, import_suite) and drafts of versions.
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return (
            super().has_delete_permission(request, obj) and obj is not None and not _published(obj)
        )

    def save_model(self, request: HttpRequest, obj: SuiteVersion, form: Any, change: bool) -> None:
        if "description" in form.changed_data:
            services.suite_version_update(draft=obj, description=form.cleaned_data["description"])

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        # The services save the rows, not the formset; what formset.save() would record of
        # them is the change message's source (without it every save of the page failed).
        formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []
        if formset.model is not SuiteOperator:
            return
        for inline_form in formset.forms:
            if not inline_form.has_changed():
                continue
            data = inline_form.cleaned_data
            services.operator_update(
                suite_operator=inline_form.instance,
                enabled=data.get("enabled"),
                description=data.get("description"),
                importance=data.get("importance"),
            )
            formset.changed_objects.append((inline_form.instance, inline_form.changed_data))

    # -- actions on the list: each goes to the page of one version

    def _single(
        self, request: HttpRequest, queryset: QuerySet[SuiteVersion]
    ) -> SuiteVersion | None:
        if queryset.count() != 1:
            messages.error(request, "Select exactly one suite version.")
            return None
        return queryset.get()

    @admin.action(description="Create a draft from this version")
    def create_draft(self, request: HttpRequest, queryset: QuerySet[SuiteVersion]) -> Any:
        version = self._single(request, queryset)
        if version is not None:
            return HttpResponseRedirect(
                reverse("admin:catalogue_suiteversion_draft", args=[version.pk])
            )
        return None

    @admin.action(description="Show the diff against its parent")
    def show_diff(self, request: HttpRequest, queryset: QuerySet[SuiteVersion]) -> Any:
        version = self._single(request, queryset)
        if version is not None:
            return HttpResponseRedirect(
                reverse("admin:catalogue_suiteversion_diff", args=[version.pk])
            )
        return None

    @admin.action(description="Publish (validate and freeze)")
    def publish(self, request: HttpRequest, queryset: QuerySet[SuiteVersion]) -> None:
        version = self._single(request, queryset)
        if version is not None:
            self._publish(request, version)

    def _publish(self, request: HttpRequest, version: SuiteVersion) -> bool:
        try:
            published = services.suite_version_publish(draft=version, actor=request.user)
        except services.CurationError as error:
            _report(request, error)
            return False
        messages.success(request, f"Published {published.slug} ({published.content_hash}).")
        return True

    # -- pages

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path("<int:pk>/draft/", view(self.draft_view), name="catalogue_suiteversion_draft"),
            path("<int:pk>/diff/", view(self.diff_view), name="catalogue_suiteversion_diff"),
            path(
                "<int:pk>/publish/",
                view(self.publish_view),
                name="catalogue_suiteversion_publish",
            ),
            path(
                "<int:pk>/upload-operator/",
                view(self.upload_view),
                name="catalogue_suiteversion_upload",
            ),
            *super().get_urls(),
        ]

    def _context(self, request: HttpRequest, version: SuiteVersion, title: str) -> dict[str, Any]:
        return {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": version,
            "version": version,
            "title": title,
        }

    def _version(self, request: HttpRequest, pk: int) -> SuiteVersion:
        if not self.has_view_permission(request):
            raise PermissionDenied
        return get_object_or_404(SuiteVersion, pk=pk)

    def _change_url(self, version: SuiteVersion) -> str:
        return reverse("admin:catalogue_suiteversion_change", args=[version.pk])

    def draft_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        version = self._version(request, pk)
        if not self.has_change_permission(request):
            raise PermissionDenied
        form = DraftForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                draft = services.suite_version_draft_create(
                    from_version=version, version_label=form.cleaned_data["version_label"]
                )
            except services.CurationError as error:
                form.add_error("version_label", error.message)
            else:
                messages.success(request, f"Draft {draft.slug} created from {version.slug}.")
                return HttpResponseRedirect(self._change_url(draft))
        context = self._context(request, version, f"Create a draft from {version.slug}")
        context["form"] = form
        return TemplateResponse(request, "catalogue/admin/draft_form.html", context)

    def diff_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        version = self._version(request, pk)
        against = version.parent
        if request.GET.get("against"):
            against = get_object_or_404(SuiteVersion, pk=request.GET["against"])
        context = self._context(request, version, f"Changes in {version.slug}")
        context["against"] = against
        context["diff"] = (
            services.suite_version_diff(draft=version, against=against) if against else None
        )
        context["can_publish"] = not version.is_published and self.has_change_permission(request)
        return TemplateResponse(request, "catalogue/admin/diff.html", context)

    def publish_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        version = self._version(request, pk)
        if request.method != "POST" or not self.has_change_permission(request):
            raise PermissionDenied
        self._publish(request, version)
        return HttpResponseRedirect(self._change_url(version))

    def upload_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        version = self._version(request, pk)
        if not self.has_change_permission(request):
            raise PermissionDenied
        form = UploadOperatorForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            archive = form.cleaned_data["archive"]
            try:
                upload = read_operator_zip(
                    archive.read(),
                    source=f"upload {archive.name} by {request.user.get_username()}",
                    slug=form.cleaned_data["slug"] or None,
                )
                row = services.operator_upload_add(draft=version, upload=upload)
            except UpstreamFormatError as error:
                for problem in error.problems:
                    form.add_error("archive", problem)
            except services.CurationError as error:
                form.add_error("archive", error.message)
            else:
                messages.success(
                    request,
                    f"Added {row.operator.slug} ({len(upload.shapes)} shapes) to {version.slug}.",
                )
                return HttpResponseRedirect(self._change_url(version))
        context = self._context(request, version, f"Add an uploaded operator to {version.slug}")
        context["form"] = form
        return TemplateResponse(request, "catalogue/admin/upload_operator.html", context)


# --------------------------------------------------------------------------- shapes


class ShapeForm(forms.ModelForm):
    # An empty JSON object is a value here, not a missing one: 400 of v1's and v0.1's shapes
    # take no init kwargs ({}), and their pages could not be saved while these were
    # required ("This field is required."). An emptied box means {} as well.
    OBJECTS = ("init_kwargs", "input_kwargs", "w_flops")

    class Meta:
        model = Shape
        fields = ["suite_version", "operator", "shape_id", *services.SHAPE_EDITABLE]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in self.OBJECTS:
            if name in self.fields:
                self.fields[name].required = False

    def clean(self) -> dict[str, Any]:
        for name in self.OBJECTS:
            if name in self.cleaned_data and self.cleaned_data[name] is None:
                self.cleaned_data[name] = {}
        cleaned = super().clean()
        fields = {k: cleaned[k] for k in services.SHAPE_EDITABLE if k in cleaned}
        for problem in services._shape_problems(fields):
            self.add_error(None, problem)
        version = cleaned.get("suite_version")
        if self.instance.pk is None and version is not None and version.is_published:
            self.add_error("suite_version", "Shapes can only be added to a draft.")
        return cleaned


@admin.register(Shape)
class ShapeAdmin(admin.ModelAdmin):
    form = ShapeForm
    list_display = [
        "suite_version",
        "operator",
        "shape_id",
        "weight",
        "visibility",
        "enabled",
        "smoke",
        "q_read",
        "q_write",
    ]
    list_filter = [
        ("suite_version", SuiteVersionListFilter),
        "suite_version__status",
        "operator",
        "visibility",
        "enabled",
        "smoke",
    ]
    list_editable = ["weight", "visibility", "enabled"]
    list_select_related = ["suite_version", "operator"]
    search_fields = ["shape_id", "operator__slug"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Shape]:
        return selectors.without_suite_definition(
            super().get_queryset(request).select_related(*self.list_select_related)
        )

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        changelist = super().get_changelist_instance(request)
        # Inline editing only on a list filtered to one draft, so no published row is in it.
        draft = request.GET.get("suite_version__id__exact")
        if not (draft and SuiteVersion.objects.filter(pk=draft, status="draft").exists()):
            changelist.list_editable = ()
        return changelist

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        if obj is None:
            return []
        return ["suite_version", "operator", "shape_id"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_change_permission(request, obj) and not _published(obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_delete_permission(request, obj) and not _published(obj)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "suite_version":
            kwargs["queryset"] = SuiteVersion.objects.filter(status=SuiteVersion.Status.DRAFT)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: Shape, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if change:
            fields = {k: data[k] for k in form.changed_data if k in services.SHAPE_EDITABLE}
            services.shape_update(shape=obj, **fields)
            return
        created = services.shape_add(
            draft=data["suite_version"],
            operator=data["operator"],
            shape_id=data["shape_id"],
            init_kwargs=data.get("init_kwargs") or {},
            input_kwargs=data.get("input_kwargs") or {},
            w_flops=data.get("w_flops"),
            q_read=data.get("q_read"),
            q_write=data.get("q_write"),
            weight=data.get("weight", 1.0),
            visibility=data.get("visibility", Shape.Visibility.PUBLIC),
            smoke=data.get("smoke", False),
            enabled=data.get("enabled", True),
            source=data.get("source") or "admin",
            description=data.get("description", ""),
        )
        obj.pk = created.pk

    def delete_model(self, request: HttpRequest, obj: Shape) -> None:
        services.shape_delete(shape=obj)
