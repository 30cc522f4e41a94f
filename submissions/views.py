"""Pages: upload, a submission's page (live progress, roofline and comparison charts,
history with curation), the owner's list, downloads (upload, per-shape results)."""

from __future__ import annotations

import time
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from agents import selectors as agent_selectors
from atrex_site import charts, page_cache
from atrex_site.csv_export import header_with_units, write_rows
from catalogue import selectors as catalogue_selectors

from . import selectors, services
from .cancellation import NotCancellable, NotYours, submission_can_cancel
from .cancellation import submission_cancel as cancel_service
from .checks import bundle_check
from .forms import BundleUploadForm
from .models import OperatorResult, ShapeResult, Submission
from .queues import queue_states, wait_in_words
from .quotas import QuotaExceeded, quota_status, quota_summary
from .result_tables import STATUS_GROUPS, VERDICT_WORDS, environment_items
from .scores import COMPILE_BASELINE, compile_baseline_times, geomean_speedups


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


# The columns the comparison chart reads of a board row.
_COMPARISON_FIELDS = ("submission_id", "run_id", "operator_scores", "submission__title")
# Shapes whose time is that of a correct answer (a fallback is correct, not the bundle's own).
_CORRECT = ("pass", "fallback")


def _correct_times(results) -> dict[tuple, float]:
    return {
        (r.operator, r.shape_id): r.time_ms for r in results if r.status in _CORRECT and r.time_ms
    }


def _comparison_chart(
    submission: Submission, operator_results: list[OperatorResult], shape_results: list
) -> dict[str, Any] | None:
    """This submission against the board, per operator: its speed-up over torch.compile
    (the board's compile baseline), and the best ranked row's; without a compile baseline,
    its speed-up over the best row. Speed-ups rather than scores, because the baselines
    score 0 (every shape of theirs is a fallback) and bars of 0 say nothing.

    Three bounded queries: the compile baseline's run and times, the best other ranked row
    (ranking order, ``LIMIT 1``, title and operator scores only), and that row's times."""
    if not operator_results:
        return None
    operators = [result.operator for result in operator_results]
    own = _correct_times(shape_results)
    compile_times = (
        {}
        if (submission.manifest or {}).get("baseline") == COMPILE_BASELINE
        else compile_baseline_times(
            suite_version_id=submission.suite_version_id, hardware_id=submission.hardware_id
        )
    )
    best = (
        selectors.scores_on_board(suite=submission.suite_version, hardware=submission.hardware)
        .exclude(submission_id=submission.pk)
        .filter(submission__is_baseline=False)
        .select_related(None)
        .select_related("submission")
        .only(*_COMPARISON_FIELDS)
        .first()
    )
    best_times = (
        _correct_times(
            ShapeResult.objects.filter(run_id=best.run_id).only(
                "operator", "shape_id", "status", "time_ms"
            )
        )
        if best is not None
        else {}
    )

    def ratios(base: dict[tuple, float], times: dict[tuple, float]) -> dict[str, float | None]:
        found = geomean_speedups(base_times=base, times=times)
        return {op: found[op][0] if op in found else None for op in operators}

    series: list[tuple[str, dict[str, float | None]]]
    if compile_times:
        reference = "torch.compile"
        series = [("this submission", ratios(compile_times, own))]
        if best is not None:
            series.append(
                (f"best on the board: {best.submission.title}", ratios(compile_times, best_times))
            )
    elif best is not None:
        reference = f"the best on the board ({best.submission.title})"
        series = [("this submission", ratios(best_times, own))]
    else:
        return None
    if not any(value for _, by_op in series for value in by_op.values()):
        # No shape timed by both: the scores, side by side, are all there is to show.
        scores = [("this submission", {r.operator: r.score for r in operator_results})]
        if best is not None:
            scores.append((f"best on the board: {best.submission.title}", best.operator_scores))
        return charts.operator_scores_figure(
            operators=operators, series=scores, title="Operator scores against the board"
        )
    return charts.operator_speedup_figure(
        operators=operators,
        series=series,
        reference=reference,
        title=f"Speed-up over {reference}, per operator",
    )


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


def _history_for(submission: Submission, *, withheld: bool) -> list[dict[str, Any]]:
    """``_history``; while the results are withheld from the reader, status changes keep
    no note (the hold's note names the operators, shapes and signs an admin reviews)."""
    items = _history(submission)
    if withheld:
        for item in items:
            if item["kind"] == "status":
                item["change"].note = ""
    return items


# Owners of submissions, kept per process (see reader_owns_submission).
OWNERS_S = 60.0
OWNERS_KEPT = 4096
_OWNERS: dict[int, tuple[float, int]] = page_cache.kept_per_process({})


def reader_owns_submission(reader: Any, pk: int, **_kwargs: Any) -> bool:
    """Whether the signed-in ``reader`` owns submission ``pk``: its page then shows them
    more (cancel, files, a private submission), so it is built for them, not shared.

    The owner of each submission is kept in this process for ``OWNERS_S`` seconds (a
    submission's owner changes only in the admin). Either answer fails safe: a page built
    for its reader shows them only what they may see, and a shared copy only what anyone
    may (a submission they may not see is built for them, and refused)."""
    now = time.monotonic()
    kept = _OWNERS.get(pk)
    if kept is None or now - kept[0] > OWNERS_S:
        owner_id = Submission.objects.filter(pk=pk).values_list("owner_id", flat=True).first()
        if owner_id is None:
            return False  # no such submission (yet): not kept
        if len(_OWNERS) >= OWNERS_KEPT:
            _OWNERS.clear()
        kept = _OWNERS[pk] = (now, owner_id)
    return kept[1] == reader.pk


def submission_detail(request: HttpRequest, pk: int) -> HttpResponse:
    submission = _visible_submission(request, pk)
    # Held for review: nothing of its run is shown to anyone but its owner and staff.
    withheld = selectors.submission_results_withheld(submission=submission, user=request.user)
    run = None if withheld else selectors.submission_latest_run(submission=submission)
    operator_results = list(run.operator_results.all()) if run else []
    shape_results = (
        list(selectors.shape_results_visible_to(run=run, user=request.user)) if run else []
    )
    score = getattr(submission, "score", None) if submission.status == "published" else None
    roofline, roofline_skipped = _roofline_chart(submission, shape_results)
    tables = (
        selectors.submission_result_tables(
            submission=submission,
            run=run,
            score=score,
            operator_results=operator_results,
            shape_results=shape_results,
            status_filter=request.GET.get("status", ""),
        )
        if run and operator_results
        else None
    )
    context = {
        "submission": submission,
        "withheld": withheld,
        "run": run,
        "score": score,
        "scores": (run.results or {}).get("scores") if run and run.results else None,
        "operator_results": operator_results,
        "shape_results": shape_results,
        "tables": tables,
        "status_groups": list(STATUS_GROUPS),
        "verdict_words": VERDICT_WORDS,
        "environment": environment_items(run.environment) if run else [],
        "progress": selectors.submission_progress(submission=submission),
        "history": _history_for(submission, withheld=withheld),
        "can_see_files": selectors.submission_can_see_files(
            submission=submission, user=request.user
        ),
        "roofline_chart": roofline,
        "roofline_skipped": roofline_skipped,
        "comparison_chart": _comparison_chart(submission, operator_results, shape_results),
        "can_cancel": submission_can_cancel(submission=submission, user=request.user),
        "can_resubmit": submission.status == Submission.Status.REJECTED
        and request.user.is_authenticated
        and request.user.pk == submission.owner_id,
    }
    # An agent submission's campaign: provenance, rounds and the per-round chart (its
    # rounds' figures are results too: withheld with the rest).
    if not withheld:
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


WITHHELD_MESSAGE = (
    "Submission #{pk} is held for review: its results are not published until an admin "
    "releases them. Its owner and the admins can download them now.\n"
)


@require_GET
def submission_results_download(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    """The latest run's per-shape results as CSV or JSON (private ones: owner and staff)."""
    if fmt not in ("csv", "json"):
        raise Http404
    submission = _visible_submission(request, pk)
    if selectors.submission_results_withheld(submission=submission, user=request.user):
        return HttpResponse(
            WITHHELD_MESSAGE.format(pk=submission.pk),
            status=403,
            content_type="text/plain; charset=utf-8",
        )
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
        body = ([row[field] for field in RESULT_FIELDS] for row in rows)
        write_rows(response, [header_with_units(RESULT_FIELDS), *body])
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
    submissions = catalogue_selectors.without_suite_definition(
        selectors.submissions_visible_to(user=request.user)
        .filter(owner=request.user)
        .select_related("score")
    )
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
