"""Admin for submissions and runs. Curation goes through admin actions that ask for a
reason on an intermediate page and call ``submissions.curation``; nothing here edits a
status or a curation flag directly."""

from __future__ import annotations

from collections.abc import Callable

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.html import format_html, format_html_join

from atrex_site import admin_figures
from catalogue.admin import SuiteVersionListFilter
from evaluator import figures
from evaluator.figures import duration_ms, roofline_percent

from . import curation, selectors
from .models import CurationLog, EvaluationRun, Score, Shard, StatusChange, Submission

Action = CurationLog.Action


class StatusChangeInline(admin.TabularInline):
    model = StatusChange
    extra = 0
    readonly_fields = ["from_status", "to_status", "note", "at"]
    can_delete = False


class CurationLogInline(admin.TabularInline):
    model = CurationLog
    extra = 0
    readonly_fields = ["at", "actor", "action", "reason"]
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


class CurationReasonForm(forms.Form):
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text="Logged with your name and shown in the submission's history.",
    )


def _curation_action(action: str, label: str) -> Callable:
    """An admin action that asks for a reason, then applies ``action`` to each selected
    submission through ``curation.curation_apply``, reporting refusals one by one."""

    def run(
        modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Submission]
    ) -> HttpResponse | None:
        form = CurationReasonForm(request.POST if "apply" in request.POST else None)
        if "apply" in request.POST and form.is_valid():
            done = 0
            for submission in queryset:
                try:
                    curation.curation_apply(
                        submission=submission,
                        actor=request.user,
                        action=action,
                        reason=form.cleaned_data["reason"],
                    )
                    done += 1
                except curation.CurationRefused as error:
                    modeladmin.message_user(
                        request, f"#{submission.pk}: {error.message}", messages.WARNING
                    )
            if done:
                modeladmin.message_user(request, f"{label}: {done} submission(s).")
            return None
        context = {
            **modeladmin.admin_site.each_context(request),
            "title": f"{label}: give a reason",
            "opts": modeladmin.model._meta,
            "queryset": queryset,
            "form": form,
            "action": request.POST.get("action", ""),
            "action_label": label,
            "checkbox_name": ACTION_CHECKBOX_NAME,
            # What the reviewer weighs before releasing or rejecting held results.
            "signals": (
                {s.pk: review_signals_html(s) for s in queryset}
                if action in (Action.RELEASE, Action.REJECT)
                else {}
            ),
        }
        return TemplateResponse(
            request, "admin/submissions/submission/curation_action.html", context
        )

    run.__name__ = f"curate_{action}"
    run.short_description = label  # type: ignore[attr-defined]
    run.allowed_permissions = ("change",)  # type: ignore[attr-defined]
    return run


def _signal_figures(signal: dict) -> str:
    parts = []
    if signal.get("time_ms") is not None:
        parts.append(f"timed {duration_ms(signal['time_ms'])}")
    if signal.get("watched_time_ms") is not None:
        parts.append(f"watched {duration_ms(signal['watched_time_ms'])}")
    if signal.get("unwatched_speedup") is not None:
        # On the CPU the ratio is of counted times (evaluator.counted_time), not of these.
        parts.append(f"timed {signal['unwatched_speedup']:.1f}x faster than watched")
    if signal.get("t_sol_ms") is not None:
        parts.append(f"roofline bound {duration_ms(signal['t_sol_ms'])}")
    if signal.get("roofline_fraction") is not None:
        parts.append(f"{roofline_percent(signal['roofline_fraction'])} of the roofline")
    return ", ".join(parts)


def review_signals_html(submission: Submission) -> str:
    """Every sign of deception of the submission's latest run, one table row each: operator,
    shape, code, what it means, the figures and the harness's evidence."""
    signals = selectors.submission_review_signals(submission=submission)
    if not signals:
        return format_html("<p>{}</p>", "No sign of deception in the latest run.")
    rows = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
        (
            (s["operator"], s["shape_id"], s["code"], s["label"], _signal_figures(s), s["evidence"])
            for s in signals
        ),
    )
    # Scrolls sideways on a phone rather than squeezing the evidence out of sight.
    return format_html(
        '<div style="overflow-x: auto; max-width: 100%">'
        '<table class="review-signals" style="min-width: 44rem"><thead><tr><th>Operator</th>'
        "<th>Shape</th><th>Code</th><th>Sign</th><th>Figures</th><th>Evidence</th></tr>"
        "</thead><tbody>{}</tbody></table></div>",
        rows,
    )


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = [
        "pk",
        "title",
        "owner",
        "status",
        "visibility",
        "hidden",
        "verified",
        "hacked",
        "suite_version",
        "hardware",
    ]
    list_filter = ["status", "visibility", "kind", "is_baseline", "hidden", "verified", "hacked"]
    search_fields = ["title", "owner__username"]
    # Status moves and curation flags change only through services (logged), never here.
    readonly_fields = [
        "review_signals",
        "status",
        "status_changed_at",
        "error_code",
        "error_message",
        "manifest",
        "hidden",
        "verified",
        "hacked",
    ]
    inlines = [StatusChangeInline, CurationLogInline]
    actions = [
        _curation_action(Action.HIDE, "Hide from the board"),
        _curation_action(Action.UNHIDE, "Show on the board again"),
        _curation_action(Action.VERIFY, "Mark verified"),
        _curation_action(Action.UNVERIFY, "Withdraw verification"),
        _curation_action(Action.MARK_HACKED, "Mark hacked (never ranked)"),
        _curation_action(Action.CLEAR_HACKED, "Clear the hacked mark"),
        _curation_action(Action.RERUN, "Re-run on the current harness"),
        _curation_action(Action.RELEASE, "Release held results"),
        _curation_action(Action.REJECT, "Reject held results"),
    ]

    def get_fields(self, request: HttpRequest, obj: Submission | None = None) -> list:
        """The review (signs of deception) first: what a held submission's page is for."""
        fields = [f for f in super().get_fields(request, obj) if f != "review_signals"]
        return ["review_signals", *fields] if obj is not None else fields

    @admin.display(description="Signs of deception (why it is held for review)")
    def review_signals(self, obj: Submission) -> str:
        return review_signals_html(obj)


@admin.register(CurationLog)
class CurationLogAdmin(admin.ModelAdmin):
    list_display = ["at", "submission", "actor", "action", "reason"]
    list_filter = ["action"]
    readonly_fields = ["submission", "actor", "action", "reason", "at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


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


@admin.register(Shard)
class ShardAdmin(admin.ModelAdmin):
    """Read-only: shards move by the task and the reaper, never by hand."""

    list_display = ["pk", "run", "index", "attempt", "status", "worker", "shapes_done"]
    list_filter = ["status"]
    readonly_fields = ["results", "log_tail"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(Score)
class ScoreAdmin(admin.ModelAdmin):
    """Read-only: a score is computed from a run and published by ``submissions.scores``;
    the figures read as on the board (% of the roofline, three significant figures)."""

    list_display = ["submission", "suite_version", "hardware", "aggregate_shown", "published_at"]
    list_filter = [("suite_version", SuiteVersionListFilter), "hardware"]
    fields = [
        "submission", "run", "suite_version", "hardware", "aggregate_shown", "interval",
        "real_pass", "apparent_pass", "fallback", "speedup_eager", "speedup_compile",
        "operator_figures", "published_at",
    ]  # fmt: skip
    readonly_fields = fields

    aggregate_shown = admin_figures.roofline("aggregate", "score (% of roofline)")
    real_pass = admin_figures.roofline("real_pass_rate", "real-kernel pass rate")
    apparent_pass = admin_figures.roofline("apparent_pass_rate", "apparent pass rate")
    fallback = admin_figures.roofline("fallback_rate", "fallback rate")
    speedup_eager = admin_figures.speedup("geomean_speedup_eager", "speedup vs eager (geomean)")
    speedup_compile = admin_figures.speedup(
        "geomean_speedup_compile", "speedup vs torch.compile (geomean)"
    )

    @admin.display(description="95% interval")
    def interval(self, obj: Score) -> str:
        low, high = obj.aggregate_ci_low, obj.aggregate_ci_high
        if low is None or high is None:
            return figures.MISSING
        return f"[{figures.percent(low)}, {figures.percent(high)}]"

    @admin.display(description="operator scores (% of roofline)")
    def operator_figures(self, obj: Score) -> str:
        return ", ".join(f"{slug} {figures.percent(v)}" for slug, v in obj.operator_scores.items())

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
