"""The upload form. Validation of the bundle itself is the service's job (it keeps the
upload and records why it was rejected); the form only checks what it can see."""

from __future__ import annotations

from django import forms

from catalogue.models import HardwareProfile, SuiteVersion

from .models import Submission


class BundleUploadForm(forms.Form):
    bundle = forms.FileField(
        label="Kernel bundle",
        allow_empty_file=True,  # an empty file becomes a rejected submission with a reason
        help_text=(
            "A .zip or .tar.gz of <operator>.py files, each defining class Model, "
            "or a single <operator>.py."
        ),
    )
    title = forms.CharField(
        max_length=200, required=False, help_text="Defaults to atrex.toml's title."
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
    dsl = forms.CharField(max_length=40, required=False, label="DSL", help_text="e.g. triton")
    model_name = forms.CharField(
        max_length=120, required=False, label="Model", help_text="The LLM that wrote it, if any."
    )
    agent_name = forms.CharField(max_length=120, required=False, label="Agent")
    notes = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
