"""Forms for registering an endpoint and starting a campaign. Whether the URL may be
called is the service's check (it resolves the host); the form checks what it can see."""

from __future__ import annotations

from django import forms

from catalogue.models import HardwareProfile, SuiteVersion
from submissions.models import Submission

from .models import AgentEndpoint


class EndpointForm(forms.Form):
    name = forms.CharField(max_length=120, help_text="Shown on the board as the agent's name.")
    url = forms.CharField(
        max_length=500,
        label="URL",
        help_text="The agent's base URL (http or https); the portal calls <url>/health and "
        "<url>/kernel.",
    )
    model_name = forms.CharField(
        max_length=120, required=False, label="Model", help_text="The LLM behind it, if any."
    )
    agent_version = forms.CharField(max_length=60, required=False, label="Agent version")
    dsl = forms.CharField(max_length=40, initial="triton", label="DSL")
    rounds_per_operator = forms.IntegerField(
        min_value=1, max_value=20, initial=4, help_text="Measure-revise rounds per operator."
    )
    seconds_per_call = forms.IntegerField(
        min_value=1, max_value=900, initial=120, help_text="Time the agent has for one answer."
    )
    max_response_bytes = forms.IntegerField(
        min_value=1024,
        max_value=4 * 1024 * 1024,
        initial=256 * 1024,
        label="Response bytes",
        help_text="Largest answer accepted.",
    )
    operators = forms.CharField(
        required=False,
        help_text="Comma-separated operator slugs to attempt (empty: every operator of the suite).",
    )

    def clean_operators(self) -> tuple[str, ...]:
        text = self.cleaned_data.get("operators") or ""
        return tuple(slug.strip() for slug in text.replace("\n", ",").split(",") if slug.strip())


class CampaignForm(forms.Form):
    title = forms.CharField(
        max_length=200, required=False, help_text="Defaults to the endpoint's name."
    )
    visibility = forms.ChoiceField(
        choices=Submission.Visibility.choices, initial=Submission.Visibility.PUBLIC
    )
    suite_version = forms.ModelChoiceField(
        queryset=SuiteVersion.objects.filter(status=SuiteVersion.Status.PUBLISHED),
        required=False,
        empty_label=None,
    )
    hardware = forms.ModelChoiceField(
        queryset=HardwareProfile.objects.filter(enabled=True), required=False, empty_label=None
    )


def endpoint_summary(endpoint: AgentEndpoint) -> str:
    operators = ", ".join(endpoint.operators) or "every operator of the suite"
    return (
        f"{endpoint.rounds_per_operator} round(s) per operator, {endpoint.seconds_per_call} s "
        f"per call, answers up to {endpoint.max_response_bytes:,} bytes; {operators}"
    )
