"""The log-in form: Django's, with the lockout checked first and said in plain words."""

from __future__ import annotations

from django import forms
from django.contrib.auth.forms import AuthenticationForm

from .lockout import Lockout, client_ip, login_lockout


class LockoutAuthenticationForm(AuthenticationForm):
    lockout: Lockout | None = None

    def clean(self):
        self.lockout = login_lockout(username=self.data.get("username"), ip=client_ip(self.request))
        if self.lockout is not None:
            raise forms.ValidationError(self.lockout.message, code="locked_out")
        return super().clean()


class ApiTokenForm(forms.Form):
    name = forms.CharField(
        max_length=100, required=False, help_text="To tell your tokens apart, e.g. 'gpu node'."
    )
    expires_in_days = forms.IntegerField(
        min_value=1, max_value=3650, required=False, help_text="Leave empty: never expires."
    )
