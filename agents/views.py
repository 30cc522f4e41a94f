"""Pages: the owner's endpoints, registering one (its secret shown once), an endpoint's page
with the test-connection button and the form that starts a campaign."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from catalogue import selectors as catalogue_selectors
from evaluator.errors import UserError

from . import selectors, services
from .forms import CampaignForm, EndpointForm, endpoint_summary


@login_required
def endpoint_list(request: HttpRequest) -> HttpResponse:
    endpoints = selectors.endpoints_of(user=request.user)
    return render(request, "agents/list.html", {"endpoints": endpoints})


def _secret_page(request: HttpRequest, endpoint, secret: str) -> HttpResponse:
    response = render(request, "agents/secret.html", {"endpoint": endpoint, "secret": secret})
    # The secret is in this page only: never cached, never shown again.
    response["Cache-Control"] = "no-store"
    return response


@login_required
def endpoint_new(request: HttpRequest) -> HttpResponse:
    form = EndpointForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            endpoint, secret = services.endpoint_register(
                owner=request.user,
                fields=services.EndpointFields(
                    name=data["name"],
                    url=data["url"],
                    model_name=data["model_name"],
                    agent_version=data["agent_version"],
                    dsl=data["dsl"],
                    rounds_per_operator=data["rounds_per_operator"],
                    seconds_per_call=data["seconds_per_call"],
                    max_response_bytes=data["max_response_bytes"],
                    operators=data["operators"],
                ),
            )
        except UserError as error:
            field = "operators" if error.code == "agent:unknown-operator" else "url"
            form.add_error(field, error.message)
        else:
            return _secret_page(request, endpoint, secret)
    return render(request, "agents/new.html", {"form": form})


def _own_endpoint(request: HttpRequest, pk: int):
    return get_object_or_404(selectors.endpoints_of(user=request.user), pk=pk)


@login_required
def endpoint_detail(request: HttpRequest, pk: int) -> HttpResponse:
    endpoint = _own_endpoint(request, pk)
    form = CampaignForm()
    form.fields["suite_version"].initial = catalogue_selectors.suite_version_default()
    form.fields["hardware"].initial = catalogue_selectors.hardware_default()
    campaigns = endpoint.campaigns.select_related("submission")[:50]
    context = {
        "endpoint": endpoint,
        "summary": endpoint_summary(endpoint),
        "form": form,
        "campaigns": campaigns,
    }
    return render(request, "agents/detail.html", context)


@login_required
@require_POST
def endpoint_test(request: HttpRequest, pk: int) -> HttpResponse:
    endpoint = _own_endpoint(request, pk)
    ok, message = services.endpoint_check(endpoint=endpoint)
    (messages.success if ok else messages.error)(request, f"Test connection: {message}")
    return redirect("agents:detail", pk=endpoint.pk)


@login_required
@require_POST
def endpoint_rotate(request: HttpRequest, pk: int) -> HttpResponse:
    endpoint = _own_endpoint(request, pk)
    secret = services.endpoint_secret_rotate(endpoint=endpoint)
    return _secret_page(request, endpoint, secret)


@login_required
@require_POST
def campaign_new(request: HttpRequest, pk: int) -> HttpResponse:
    endpoint = _own_endpoint(request, pk)
    form = CampaignForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            submission = services.campaign_start(
                owner=request.user,
                endpoint=endpoint,
                title=data["title"],
                visibility=data["visibility"],
                suite_version=data["suite_version"],
                hardware=data["hardware"],
            )
        except UserError as error:
            messages.error(request, error.message)
        else:
            return redirect("submissions:detail", pk=submission.pk)
    else:
        messages.error(request, f"The campaign was not started: {form.errors.as_text()}")
    return redirect("agents:detail", pk=endpoint.pk)
