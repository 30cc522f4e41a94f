"""Pages: upload, a submission's page (live progress, roofline and comparison charts,
history with curation), the owner's list, downloads (upload, per-shape results)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from agents import selectors as agent_selectors
from atrex_site import charts
from atrex_site.csv_export import write_rows
from catalogue import selectors as catalogue_selectors

from . import selectors, services
from .cancellation import NotCancellable, NotYours, submission_can_cancel
from .cancellation import submission_cancel as cancel_service
from .checks import bundle_check
from .forms import BundleUploadForm
from .models import OperatorResult, ShapeResult, Submission
from .queues import queue_states, wait_in_words
from .quotas import QuotaExceeded, quota_status, quota_summary


def _upload_form(request: HttpRequest) -> tuple[BundleUploadForm, list]:
    """The upload form, its hardware choices labelled with whether a worker serves them
    now, and those queues' states (the page's table)."""
    form = BundleUploadForm(request.POST or None, request.FILES or None)
    states = queue_states()
    by_slug = {state.hardware: state for state in states}

    def label(hardware) -> str:
        state = by_slug.get(hardware.slug)
        if state is None or not state.serves:
            return f"{hardware.name} (no worker online: a submission waits)"
        workers = state.workers_online
        return f"{hardware.name} ({workers} worker{'s' if workers != 1 else ''} online)"

    form.fields["hardware"].label_from_instance = label
    return form, states


def _form_context(request: HttpRequest, form: BundleUploadForm, states: list, **extra):
    return {
        "form": form,
        "queues": [
            (state, wait_in_words(state.wait_s(ahead=state.waiting), state)) for state in states
        ],
        "quota": quota_summary(quota_status(owner=request.user)),
        **extra,
    }


def _resubmission_initial(request: HttpRequest) -> dict[str, Any]:
    """``?from=<id>`` (the rejected page's "upload a corrected bundle"): the owner's earlier
    title and settings, so only the bundle needs choosing again."""
    try:
        pk = int(request.GET.get("from", ""))
    except ValueError:
        return {}
    earlier = Submission.objects.filter(pk=pk, owner=request.user).first()
    if earlier is None:
        return {}
    return {
        "title": earlier.title,
        "visibility": earlier.visibility,
        "suite_version": earlier.suite_version,
        "hardware": earlier.hardware,
        "dsl": earlier.dsl,
        "model_name": earlier.model_name,
        "agent_name": earlier.agent_name,
        "notes": earlier.notes,
    }


@login_required
def submission_new(request: HttpRequest) -> HttpResponse:
    form, states = _upload_form(request)
    if request.method == "POST" and form.is_valid() and request.POST.get("action") == "check":
        # Check only: the same static checks, nothing stored, no quota, no worker.
        data = form.cleaned_data
        check = bundle_check(upload=data["bundle"], suite_version=data["suite_version"])
        context = _form_context(request, form, states, check=check)
        return render(request, "submissions/new.html", context)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            submission = services.submission_create(
                owner=request.user,
                upload=data["bundle"],
                title=data["title"],
                visibility=data["visibility"],
                suite_version=data["suite_version"],
                hardware=data["hardware"],
                provenance=services.Provenance(
                    dsl=data["dsl"],
                    model_name=data["model_name"],
                    agent_name=data["agent_name"],
                    notes=data["notes"],
                ),
            )
        except QuotaExceeded as error:
            # Nothing is stored; the form says when the owner may submit again.
            form.add_error(None, error.message)
            context = _form_context(request, form, states)
            response = render(request, "submissions/new.html", context, status=429)
            response["Retry-After"] = str(error.retry_after_s)
            return response
        return redirect("submissions:detail", pk=submission.pk)
    form.fields["suite_version"].initial = catalogue_selectors.suite_version_default()
    default = catalogue_selectors.hardware_default()
    served = [state.hardware for state in states if state.serves]
    if served and (default is None or default.slug not in served):
        # Propose hardware a worker serves now rather than a queue nobody consumes.
        default = next(h for h in form.fields["hardware"].queryset if h.slug in served)
    form.fields["hardware"].initial = default
    for name, value in _resubmission_initial(request).items():
        form.fields[name].initial = value
    return render(request, "submissions/new.html", _form_context(request, form, states))


def _visible_submission(request: HttpRequest, pk: int):
    return get_object_or_404(selectors.submissions_visible_to(user=request.user), pk=pk)


def _history(submission: Submission) -> list[dict[str, Any]]:
    """Status changes and curation actions, oldest first."""
    items = [
        {"at": change.at, "kind": "status", "change": change} for change in submission.history.all()
    ]
    items += [
        {"at": entry.at, "kind": "curation", "entry": entry}
        for entry in submission.curation_log.select_related("actor")
    ]
    return sorted(items, key=lambda item: item["at"])


# The columns the comparison bars read of a board row.
_COMPARISON_FIELDS = ("submission_id", "operator_scores", "submission__title")


def _comparison_chart(
    submission: Submission, operator_results: list[OperatorResult]
) -> dict[str, Any] | None:
    """This submission's operator scores against the board's best row and its baselines.

    Two bounded queries: the best other ranked row (ranking order, ``LIMIT 1``) and the
    baseline rows, each with only the title and the operator scores."""
    if not operator_results:
        return None
    rows = (
        selectors.scores_on_board(suite=submission.suite_version, hardware=submission.hardware)
        .exclude(submission_id=submission.pk)
        .select_related(None)
        .select_related("submission")
        .only(*_COMPARISON_FIELDS)
    )
    operators = [result.operator for result in operator_results]
    series: list[tuple[str, dict[str, float]]] = [
        ("this submission", {r.operator: r.score for r in operator_results})
    ]
    best = rows.filter(submission__is_baseline=False).first()
    if best is not None:
        series.append((f"best on the board: {best.submission.title}", best.operator_scores))
    for row in rows.filter(submission__is_baseline=True):
        series.append((f"baseline: {row.submission.title}", row.operator_scores))
    return charts.operator_bars_figure(operators=operators, series=series)


def _roofline_chart(
    submission: Submission, shape_results: list[ShapeResult]
) -> tuple[dict[str, Any] | None, int]:
    points, skipped = charts.roofline_points(
        shape_results=shape_results, suite_shapes=submission.suite_version.definition["shapes"]
    )
    if not points:
        return None, skipped
    figure = charts.roofline_figure(
        points=points,
        peak_flops=submission.hardware.peak_flops,
        hbm_bytes_per_s=submission.hardware.hbm_bytes_per_s,
        hardware_name=submission.hardware.name,
    )
    return figure, skipped


def reader_owns_submission(reader: Any, pk: int, **_kwargs: Any) -> bool:
    """Whether the signed-in ``reader`` owns submission ``pk``: its page then shows them
    more (cancel, files, a private submission), so it is built for them, not shared."""
    return Submission.objects.filter(pk=pk, owner_id=reader.pk).exists()


def submission_detail(request: HttpRequest, pk: int) -> HttpResponse:
    submission = _visible_submission(request, pk)
    run = selectors.submission_latest_run(submission=submission)
    operator_results = list(run.operator_results.all()) if run else []
    shape_results = (
        list(selectors.shape_results_visible_to(run=run, user=request.user)) if run else []
    )
    score = getattr(submission, "score", None) if submission.status == "published" else None
    roofline, roofline_skipped = _roofline_chart(submission, shape_results)
    context = {
        "submission": submission,
        "run": run,
        "score": score,
        "scores": (run.results or {}).get("scores") if run and run.results else None,
        "operator_results": operator_results,
        "shape_results": shape_results,
        "progress": selectors.submission_progress(submission=submission),
        "history": _history(submission),
        "can_see_files": selectors.submission_can_see_files(
            submission=submission, user=request.user
        ),
        "roofline_chart": roofline,
        "roofline_skipped": roofline_skipped,
        "comparison_chart": _comparison_chart(submission, operator_results),
        "can_cancel": submission_can_cancel(submission=submission, user=request.user),
        "can_resubmit": submission.status == Submission.Status.REJECTED
        and request.user.is_authenticated
        and request.user.pk == submission.owner_id,
    }
    # An agent submission's campaign: provenance, rounds and the per-round chart.
    context.update(
        agent_selectors.campaign_section(
            submission=submission, can_see_sources=context["can_see_files"]
        )
    )
    return render(request, "submissions/detail.html", context)


RESULT_FIELDS = [
    "operator",
    "shape_id",
    "status",
    "weight",
    "time_ms",
    "time_spread_ms",
    "reps",
    "reference_time_ms",
    "t_sol_ms",
    "roofline_fraction",
    "speedup",
    "own_kernel_share",
    "max_abs_error",
    "error",
]


@require_GET
def submission_results_download(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    """The latest run's per-shape results as CSV or JSON (private ones: owner and staff)."""
    if fmt not in ("csv", "json"):
        raise Http404
    submission = _visible_submission(request, pk)
    run = selectors.submission_latest_run(submission=submission)
    if run is None:
        raise Http404("No evaluation run yet.")
    rows = [
        {field: getattr(result, field) for field in RESULT_FIELDS}
        for result in selectors.shape_results_visible_to(run=run, user=request.user)
    ]
    filename = f"submission-{submission.pk}-run-{run.attempt}.{fmt}"
    if fmt == "json":
        body = {
            "submission": submission.pk,
            "title": submission.title,
            "suite": submission.suite_version.slug,
            "hardware": submission.hardware.slug,
            "status": submission.status,
            "run": run.attempt,
            "harness_version": run.harness_version,
            "environment": run.environment,
            "scores": (run.results or {}).get("scores"),
            "shapes": rows,
        }
        response: HttpResponse = JsonResponse(body)
    else:
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        write_rows(response, [RESULT_FIELDS, *([row[f] for f in RESULT_FIELDS] for row in rows)])
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@require_GET
def submission_progress(request: HttpRequest, pk: int) -> JsonResponse:
    submission = _visible_submission(request, pk)
    return JsonResponse(selectors.submission_progress(submission=submission))


@login_required
def submission_download(request: HttpRequest, pk: int) -> FileResponse:
    submission = _visible_submission(request, pk)
    if not selectors.submission_can_see_files(submission=submission, user=request.user):
        raise Http404
    if not submission.upload:
        raise Http404
    # Always an attachment of an opaque type: user content is never rendered by the site.
    response = FileResponse(
        submission.upload.open("rb"),
        as_attachment=True,
        filename=submission.upload_name or "bundle",
        content_type="application/octet-stream",
    )
    response["X-Content-Type-Options"] = "nosniff"
    return response


@login_required
def submission_mine(request: HttpRequest) -> HttpResponse:
    submissions = selectors.submissions_visible_to(user=request.user).filter(owner=request.user)
    return render(request, "submissions/mine.html", {"submissions": submissions})


@login_required
@require_POST
def submission_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    """The owner's (or an admin's) cancel button: the worker stops, nothing is lost, the
    quota is refunded."""
    submission = _visible_submission(request, pk)
    try:
        cancel_service(submission=submission, actor=request.user)
    except (NotCancellable, NotYours) as error:
        messages.error(request, error.message)
    else:
        messages.success(request, "Cancelled. It does not count against your quota.")
    return redirect("submissions:detail", pk=submission.pk)
