"""Agent endpoints, the networks an admin allows them on, and campaigns with their rounds.

A campaign belongs to one submission of kind ``agent`` (linked from here, so that the
submissions app needs no migration). Statuses move only in ``agents.services``.
"""

from __future__ import annotations

import ipaddress
import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models


def _network_valid(value: str) -> None:
    try:
        ipaddress.ip_network(value.strip(), strict=False)
    except ValueError as exc:
        raise ValidationError(
            f"{value!r} is not an IP network; write e.g. 10.1.2.0/24, 127.0.0.1 or ::1/128."
        ) from exc


class AllowedNetwork(models.Model):
    """A network that agents may live in although it is private (an admin's decision)."""

    network = models.CharField(
        max_length=64,
        unique=True,
        validators=[_network_valid],
        help_text="An address or a CIDR network, e.g. 10.1.2.0/24, 127.0.0.1 or ::1/128.",
    )
    note = models.CharField(max_length=200, help_text="Why this network is allowed.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["network"]

    def __str__(self) -> str:
        return self.network


class AgentEndpoint(models.Model):
    """A researcher's agent: where it answers, the shared secret, provenance and budgets."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="agent_endpoints"
    )
    name = models.CharField(max_length=120)
    url = models.CharField(max_length=500)
    # Encrypted with a key the database does not hold (see agents.secrets): the portal must
    # be able to sign with the secret, so a one-way hash would not do.
    secret_encrypted = models.TextField()
    secret_hint = models.CharField(max_length=12, blank=True)
    model_name = models.CharField(max_length=120, blank=True)
    agent_version = models.CharField(max_length=60, blank=True)
    dsl = models.CharField(max_length=40, default="triton")
    rounds_per_operator = models.PositiveSmallIntegerField(
        default=4, validators=[MinValueValidator(1), MaxValueValidator(20)]
    )
    seconds_per_call = models.PositiveIntegerField(
        default=120, validators=[MinValueValidator(1), MaxValueValidator(900)]
    )
    max_response_bytes = models.PositiveIntegerField(
        default=256 * 1024, validators=[MinValueValidator(1024), MaxValueValidator(4 * 1024**2)]
    )
    # Operator slugs to attempt; empty: every operator of the campaign's suite.
    operators = models.JSONField(default=list, blank=True)
    last_checked_at = models.DateTimeField(null=True, blank=True)
    last_check_ok = models.BooleanField(null=True)
    last_check_message = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="agent_endpoint_name_unique")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.url})"


class Campaign(models.Model):
    """One agent submission's measure-revise loop; its kept kernels become the bundle."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Asking the agent"
        FINISHED = "finished", "Finished: kept kernels submitted"
        FAILED = "failed", "Failed"

    submission = models.OneToOneField(
        "submissions.Submission", on_delete=models.CASCADE, related_name="campaign"
    )
    endpoint = models.ForeignKey(AgentEndpoint, on_delete=models.PROTECT, related_name="campaigns")
    # Sent to the agent: it names the campaign in every request and idempotency key.
    key = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True
    )
    # The endpoint's URL, budgets and operators when the campaign started.
    plan = models.JSONField(default=dict)
    rounds_used = models.PositiveIntegerField(default=0)
    wall_s = models.FloatField(null=True, blank=True)
    input_tokens = models.BigIntegerField(null=True, blank=True)
    output_tokens = models.BigIntegerField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)
    error_code = models.CharField(max_length=60, blank=True)
    error_message = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"campaign {self.pk} of submission {self.submission_id}"

    @property
    def tokens(self) -> int | None:
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)


class CampaignRound(models.Model):
    """One round of one operator: the agent's source, the figures, the error if any."""

    class Status(models.TextChoices):
        EVALUATED = "evaluated", "Evaluated"
        AGENT_ERROR = "agent_error", "Agent error"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="rounds")
    operator = models.CharField(max_length=60)
    number = models.PositiveSmallIntegerField()
    status = models.CharField(max_length=12, choices=Status.choices)
    source = models.TextField(blank=True)
    notes = models.TextField(blank=True)
    error_code = models.CharField(max_length=60, blank=True)
    error_message = models.TextField(blank=True)
    # What the agent got back for this round (statuses, errors, times; public shapes only).
    feedback = models.JSONField(default=dict, blank=True)
    # Weighted roofline fraction over the public shapes (0 for a shape that did not pass).
    score = models.FloatField(null=True, blank=True)
    all_pass = models.BooleanField(default=False)
    kept = models.BooleanField(default=False)
    attempts = models.PositiveSmallIntegerField(default=0)
    agent_s = models.FloatField(default=0.0)
    eval_s = models.FloatField(default=0.0)
    input_tokens = models.BigIntegerField(null=True, blank=True)
    output_tokens = models.BigIntegerField(null=True, blank=True)
    cost_usd = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["operator", "number"]
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "operator", "number"], name="campaign_round_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.operator} round {self.number}: {self.status}"
