from django.contrib import admin

from .models import ApiToken, LoginFailure
from .services import api_tokens_revoke


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are created by their owners (the secret is shown to them once); staff can see
    who holds which token, when it was last used, and revoke it."""

    list_display = [
        "name",
        "user",
        "prefix",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    ]
    list_filter = ["revoked_at"]
    search_fields = ["name", "user__username", "prefix"]
    readonly_fields = [
        "user",
        "name",
        "prefix",
        "digest",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    ]
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset) -> None:
        count = api_tokens_revoke(tokens=queryset)
        self.message_user(request, f"{count} token(s) revoked.")


@admin.register(LoginFailure)
class LoginFailureAdmin(admin.ModelAdmin):
    list_display = ["username", "ip", "at"]
    search_fields = ["username", "ip"]
    readonly_fields = ["username", "ip", "at"]

    def has_add_permission(self, request) -> bool:
        return False
