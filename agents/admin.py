"""Admin: the allow-list of private networks for agents, endpoints and campaigns (read-only
figures; the secret is never shown)."""

from __future__ import annotations

from django.contrib import admin

from atrex_site import admin_figures

from .models import AgentEndpoint, AllowedNetwork, Campaign, CampaignRound


@admin.register(AllowedNetwork)
class AllowedNetworkAdmin(admin.ModelAdmin):
    list_display = ["network", "note", "created_at"]
    search_fields = ["network", "note"]


@admin.register(AgentEndpoint)
class AgentEndpointAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "url", "model_name", "agent_version", "last_check_ok"]
    search_fields = ["name", "url", "owner__username"]
    exclude = ["secret_encrypted"]
    readonly_fields = ["secret_hint", "last_checked_at", "last_check_ok", "last_check_message"]


class CampaignRoundInline(admin.TabularInline):
    model = CampaignRound
    extra = 0
    can_delete = False
    fields = ["operator", "number", "status", "round_score", "all_pass", "kept", "error_code"]
    readonly_fields = fields
    round_score = admin_figures.roofline("score", "score (% of roofline)")


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):
    list_display = ["pk", "submission", "endpoint", "status", "rounds_used", "wall_s"]
    list_filter = ["status"]
    readonly_fields = [
        "submission",
        "endpoint",
        "key",
        "status",
        "plan",
        "rounds_used",
        "wall_s",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "error_code",
        "error_message",
        "started_at",
        "heartbeat_at",
        "finished_at",
    ]
    inlines = [CampaignRoundInline]
