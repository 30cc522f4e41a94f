"""Sign-up, log-in (with lockout), and the API tokens page. Log-out is Django's own view."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.views import LoginView
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from . import services
from .forms import ApiTokenForm, LockoutAuthenticationForm


def signup(request: HttpRequest) -> HttpResponse:
    form = UserCreationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user, backend="accounts.backends.LockoutModelBackend")
        return redirect("submissions:new")
    return render(request, "registration/signup.html", {"form": form})


class LockoutLoginView(LoginView):
    """Django's log-in page; a locked-out attempt answers 429 with the time to wait."""

    authentication_form = LockoutAuthenticationForm

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.lockout is not None:
            response.status_code = 429
            response["Retry-After"] = str(form.lockout.retry_after_s)
        return response


@login_required
def tokens(request: HttpRequest) -> HttpResponse:
    """The user's API tokens; a new one is shown once, on the page that created it."""
    form = ApiTokenForm(request.POST or None)
    issued = None
    status = 200
    if request.method == "POST" and form.is_valid():
        try:
            issued = services.api_token_create(
                user=request.user,
                name=form.cleaned_data["name"] or "",
                expires_in_days=form.cleaned_data["expires_in_days"],
            )
            form = ApiTokenForm()
        except services.TokenError as error:
            form.add_error("name", error.message)
    if request.method == "POST" and issued is None:
        status = 400
    context = {
        "form": form,
        "issued": issued,
        "tokens": services.api_tokens_of(user=request.user),
    }
    response = render(request, "registration/tokens.html", context, status=status)
    # The page may show a secret: never cached anywhere.
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = services.api_tokens_of(user=request.user).filter(pk=pk).first()
    if token is None:
        raise Http404("No such active token of yours.")
    services.api_token_revoke(token=token)
    messages.info(request, f"Token {token.name!r} ({token.prefix}…) revoked.")
    return redirect("accounts:tokens")
