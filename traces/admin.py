"""Admin pages: applications, trace upload and report (mapped rows, unmapped time), the
weights of the chosen traces with charts, and proposals (a draft suite version and its
diff against the base, before publishing)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from catalogue.models import SuiteVersion
from catalogue.services import suite_version_diff
from evaluator.figures import percent, significant

from . import aggregation, charts, selectors, services
from .mapping import RulesError, compile_rules, load_rules
from .models import Application, Proposal, Trace
from .parsing import CSV_COLUMNS
from .proposal import UNOBSERVED, Parameters


@admin.register(Application)
class ApplicationAdmin(admin.ModelAdmin):
    list_display = ["name", "card_hours", "created_at"]
    search_fields = ["name"]


class UploadForm(forms.Form):
    trace = forms.FileField(
        help_text="A torch.profiler trace (.json or .json.gz, recorded with record_shapes=True) "
        f"or a CSV with the columns {', '.join(CSV_COLUMNS)}."
    )
    format = forms.ChoiceField(choices=Trace.Format.choices, initial=Trace.Format.AUTO)
    application = forms.ModelChoiceField(
        queryset=Application.objects.all(),
        required=False,
        help_text="The application the trace belongs to (or name a new one below).",
    )
    new_application = forms.CharField(max_length=120, required=False)
    card_hours = forms.FloatField(
        min_value=0,
        required=False,
        help_text="Card-hours of the new application (GPU-hours over the weighted period).",
    )
    notes = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        help_text="Provenance: where and when the trace was recorded, by whom.",
    )
    rules = forms.FileField(
        required=False,
        help_text="Optional: a JSON list of mapping rules replacing the built-in table below "
        '(each {"pattern" or "sequence", "operator", "extractor", "tier", "params"}).',
    )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if cleaned.get("new_application") and cleaned.get("card_hours") is None:
            self.add_error("card_hours", "A new application needs its card-hours.")
        if cleaned.get("rules"):
            try:
                cleaned["rules"] = load_rules(cleaned["rules"].read().decode("utf-8"))
            except UnicodeDecodeError:
                self.add_error("rules", "The rules file is not UTF-8 JSON.")
            except RulesError as error:
                self.add_error("rules", error.message)
        return cleaned


class ProposalForm(forms.Form):
    base = forms.ModelChoiceField(
        queryset=SuiteVersion.objects.filter(status=SuiteVersion.Status.PUBLISHED),
        help_text="The published version the draft starts from (its diff is shown against it).",
    )
    version_label = forms.CharField(max_length=40, help_text="e.g. v1-trace")
    coverage = forms.FloatField(
        initial=0.95,
        min_value=0.01,
        max_value=1.0,
        help_text="Keep the heaviest shapes until they hold this share of the trace weight.",
    )
    snap_tolerance = forms.FloatField(
        initial=0.1,
        min_value=0.0,
        max_value=0.99,
        help_text="Shapes whose numbers differ by at most this (relative) are one shape.",
    )
    unobserved = forms.ChoiceField(
        choices=[(u, u) for u in UNOBSERVED],
        initial="keep",
        help_text="Operators the traces do not observe: keep their importance, or drop them.",
    )


def _trace_ids(raw: str | None) -> list[int]:
    return [int(part) for part in (raw or "").split(",") if part.strip().isdigit()]


def _analysis(traces: list[Trace], coverage: float | None = None) -> dict[str, Any]:
    """Tables and charts of the weights of ``traces`` (nothing when they are empty)."""
    if not traces:
        return {}
    frame = selectors.trace_frame(traces=traces)
    hours = selectors.card_hours(traces=traces)
    applications = aggregation.application_totals(frame, hours)
    weights = aggregation.shape_weights(frame, hours)
    importance = aggregation.operator_importance(weights)
    curve = aggregation.coverage_curve(weights)
    by_operator = aggregation.time_by_operator(frame)
    total = float(applications["total_us"].sum())
    mapped = float(applications["mapped_us"].sum())
    return {
        "applications": applications.to_dict("records"),
        "weights": weights.head(200).to_dict("records"),
        "weights_count": len(weights),
        "importance": importance.to_dict("records"),
        "total_us": total,
        "mapped_us": mapped,
        "coverage": mapped / total if total > 0 else None,
        "operator_chart": charts.time_by_operator_figure(by_operator),
        "application_chart": charts.time_by_application_figure(applications),
        "coverage_chart": charts.coverage_figure(curve, coverage=coverage),
    }


@admin.register(Trace)
class TraceAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "original_name",
        "application",
        "status",
        "time_basis",
        "coverage_percent",
        "total_ms",
        "created_at",
    ]
    list_filter = ["status", "time_basis", "application"]
    search_fields = ["original_name", "sha256"]
    actions = ["show_weights"]
    change_list_template = "traces/admin/trace_changelist.html"

    @admin.display(description="mapped share")
    def coverage_percent(self, obj: Trace) -> str:
        return percent(obj.coverage)

    @admin.display(description="total time (ms)")
    def total_ms(self, obj: Trace) -> str:
        return significant(obj.total_time_us / 1e3)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a trace is read-only: re-upload to change it

    @admin.action(description="Show the weights of the selected traces (and propose)")
    def show_weights(self, request: HttpRequest, queryset: QuerySet[Trace]) -> Any:
        ids = ",".join(str(pk) for pk in queryset.values_list("pk", flat=True))
        return HttpResponseRedirect(reverse("admin:traces_trace_weights") + f"?traces={ids}")

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path("upload/", view(self.upload_view), name="traces_trace_upload"),
            path("weights/", view(self.weights_view), name="traces_trace_weights"),
            *super().get_urls(),
        ]

    def _context(self, request: HttpRequest, title: str) -> dict[str, Any]:
        return {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": title,
        }

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context: Any = None) -> Any:
        return HttpResponseRedirect(reverse("admin:traces_trace_upload"))

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        trace = get_object_or_404(Trace.objects.select_related("application"), pk=object_id)
        context = self._context(request, f"Trace #{trace.pk}: {trace.original_name}")
        context.update(
            {
                "trace": trace,
                "rows": trace.rows.select_related("application")[:500],
                "unmapped": trace.unmapped.all()[:200],
                "rows_count": trace.rows.count(),
                "unmapped_count": trace.unmapped.count(),
            }
        )
        return TemplateResponse(request, "traces/admin/trace_detail.html", context)

    def upload_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = UploadForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                application = data["application"]
                if data["new_application"]:
                    application = services.application_upsert(
                        name=data["new_application"], card_hours=data["card_hours"]
                    )
                upload = data["trace"]
                trace = services.trace_upload(
                    upload=upload,
                    name=upload.name,
                    application=application,
                    format=data["format"],
                    notes=data["notes"],
                    rules=data.get("rules") or None,
                    actor=request.user,
                )
            except services.TraceImportError as error:
                form.add_error("trace", f"{error.message} ({error.code})")
                if error.trace is not None:
                    messages.error(
                        request,
                        f"Trace #{error.trace.pk} was kept with status failed; nothing was "
                        "imported from it.",
                    )
            else:
                messages.success(
                    request,
                    f"Imported trace #{trace.pk}: {percent(trace.coverage or 0)} of its "
                    f"{'GPU' if trace.time_basis == 'gpu-kernels' else ''} time mapped.",
                )
                return HttpResponseRedirect(reverse("admin:traces_trace_change", args=[trace.pk]))
        context = self._context(request, "Upload a production trace")
        context.update({"form": form, "rules": compile_rules().table(), "csv": CSV_COLUMNS})
        return TemplateResponse(request, "traces/admin/upload.html", context)

    def weights_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        ids = _trace_ids(request.GET.get("traces"))
        queryset = Trace.objects.filter(status=Trace.Status.IMPORTED).select_related("application")
        traces = list(queryset.filter(pk__in=ids) if ids else queryset)
        form = ProposalForm(request.POST or None)
        if request.method == "POST":
            if not request.user.has_perm("catalogue.change_suiteversion"):
                raise PermissionDenied
            if form.is_valid():
                data = form.cleaned_data
                try:
                    proposal = services.proposal_create(
                        base=data["base"],
                        traces=traces,
                        version_label=data["version_label"],
                        parameters=Parameters(
                            coverage=data["coverage"],
                            snap_tolerance=data["snap_tolerance"],
                            unobserved=data["unobserved"],
                        ),
                        actor=request.user,
                    )
                except services.ProposalError as error:
                    form.add_error(None, error.message)
                    for problem in error.problems:
                        form.add_error(None, problem)
                else:
                    messages.success(request, f"Draft {proposal.draft.slug} proposed.")
                    return HttpResponseRedirect(
                        reverse("admin:traces_proposal_change", args=[proposal.pk])
                    )
        try:
            coverage = float(form["coverage"].value())
        except (TypeError, ValueError):
            coverage = None
        context = self._context(request, "Trace weights")
        context.update(
            {
                "traces": traces,
                "trace_ids": ",".join(str(t.pk) for t in traces),
                "form": form,
                **_analysis(traces, coverage=coverage),
            }
        )
        return TemplateResponse(request, "traces/admin/weights.html", context)


@admin.register(Proposal)
class ProposalAdmin(admin.ModelAdmin):
    list_display = ["draft", "base", "created_by", "created_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # proposals come from the weights page

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        proposal = get_object_or_404(Proposal.objects.select_related("draft", "base"), pk=object_id)
        traces = list(proposal.traces.select_related("application"))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Proposal: {proposal.draft.slug} from {proposal.base.slug}",
            "proposal": proposal,
            "summary": proposal.summary,
            "traces": traces,
            "diff": suite_version_diff(draft=proposal.draft, against=proposal.base),
            "can_publish": not proposal.draft.is_published
            and request.user.has_perm("catalogue.change_suiteversion"),
            **_analysis(traces, coverage=proposal.parameters.get("coverage")),
        }
        return TemplateResponse(request, "traces/admin/proposal.html", context)
