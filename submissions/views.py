"""Pages: upload, a submission's page (with live progress), the owner's list, downloads."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET

from leaderboard import selectors as board_selectors

from . import selectors, services
from .forms import BundleUploadForm


@login_required
def submission_new(request: HttpRequest) -> HttpResponse:
    form = BundleUploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
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
        return redirect("submissions:detail", pk=submission.pk)
    form.fields["suite_version"].initial = board_selectors.suite_version_default()
    form.fields["hardware"].initial = board_selectors.hardware_default()
    return render(request, "submissions/new.html", {"form": form})


def _visible_submission(request: HttpRequest, pk: int):
    return get_object_or_404(selectors.submissions_visible_to(user=request.user), pk=pk)


def submission_detail(request: HttpRequest, pk: int) -> HttpResponse:
    submission = _visible_submission(request, pk)
    run = selectors.submission_latest_run(submission=submission)
    operator_results = list(run.operator_results.all()) if run else []
    shape_results = list(run.shape_results.all()) if run else []
    score = getattr(submission, "score", None) if submission.status == "published" else None
    context = {
        "submission": submission,
        "run": run,
        "score": score,
        "scores": (run.results or {}).get("scores") if run and run.results else None,
        "operator_results": operator_results,
        "shape_results": shape_results,
        "progress": selectors.submission_progress(submission=submission),
        "history": submission.history.all(),
        "can_see_files": selectors.submission_can_see_files(
            submission=submission, user=request.user
        ),
    }
    return render(request, "submissions/detail.html", context)


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
