"""Submissions, their status history, evaluation runs, per-operator/per-shape results and
the published scores.

Status changes happen only in ``submissions.services`` (compare-and-set); nothing here
moves a status on save.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from evaluator.figures import roofline_percent

from .querysets import SubmissionQuerySet


def _upload_path(instance: Submission, filename: str) -> str:
    # A fresh folder per upload: the original name is kept for the owner, never reused.
    return f"uploads/{instance.owner_id}/{uuid.uuid4().hex}/{filename}"


class Submission(models.Model):
    class Kind(models.TextChoices):
        BUNDLE = "bundle", "Kernel bundle"
        AGENT = "agent", "Agent endpoint"

    class Visibility(models.TextChoices):
        PUBLIC = "public", "Public"
        PRIVATE = "private", "Private (you and the admins only)"

    class Status(models.TextChoices):
        RECEIVED = "received", "Received"
        VALIDATING = "validating", "Validating"
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SCORING = "scoring", "Scoring"
        PUBLISHED = "published", "Published"
        FAILED = "failed", "Failed"
        REJECTED = "rejected", "Rejected"
        CANCELLED = "cancelled", "Cancelled"
        HELD_FOR_REVIEW = "held_for_review", "Held for review"

    FINAL_STATUSES = frozenset(
        {
            Status.PUBLISHED,
            Status.FAILED,
            Status.REJECTED,
            Status.CANCELLED,
            Status.HELD_FOR_REVIEW,
        }
    )

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="submissions"
    )
    title = models.CharField(max_length=200)
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.BUNDLE)
    visibility = models.CharField(
        max_length=8, choices=Visibility.choices, default=Visibility.PUBLIC
    )
    suite_version = models.ForeignKey(
        "catalogue.SuiteVersion", on_delete=models.PROTECT, related_name="submissions"
    )
    hardware = models.ForeignKey(
        "catalogue.HardwareProfile", on_delete=models.PROTECT, related_name="submissions"
    )
    status = models.CharField(
        max_length=20, choices=Status.choices, default=Status.RECEIVED, db_index=True
    )
    status_changed_at = models.DateTimeField(auto_now_add=True)
    # Stable error code (bundle:*, eval:*, platform:*) and the message shown to the owner.
    error_code = models.CharField(max_length=60, blank=True)
    error_message = models.TextField(blank=True)

    upload = models.FileField(upload_to=_upload_path, max_length=300, blank=True)
    upload_name = models.CharField(max_length=255, blank=True)
    upload_size = models.BigIntegerField(default=0)
    upload_sha256 = models.CharField(max_length=64, blank=True)
    # What validation found: operators -> files, all files, atrex.toml metadata, warnings.
    manifest = models.JSONField(default=dict, blank=True)

    # Provenance (from the form or the bundle's atrex.toml).
    dsl = models.CharField(max_length=40, blank=True)
    model_name = models.CharField(max_length=120, blank=True)
    agent_name = models.CharField(max_length=120, blank=True)
    agent_version = models.CharField(max_length=60, blank=True)
    notes = models.TextField(blank=True)
    cost_usd = models.DecimalField(max_digits=10, decimal_places=2, null=True, blank=True)

    is_baseline = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    # Curation flags, set only through ``submissions.curation`` (each change is logged).
    # Hidden: off the board and the API, its page seen by the owner and staff only.
    hidden = models.BooleanField(default=False)
    # Verified: an admin checked the kernels and the figures; shown as a mark on the board.
    verified = models.BooleanField(default=False)
    # Hacked: the score came from gaming the harness; never ranked, page kept with a mark.
    hacked = models.BooleanField(default=False)

    objects = SubmissionQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"#{self.pk} {self.title}"

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL_STATUSES


class CurationLog(models.Model):
    """One admin curation action on a submission: who did what, when and why."""

    class Action(models.TextChoices):
        HIDE = "hide", "Hidden"
        UNHIDE = "unhide", "Shown again"
        VERIFY = "verify", "Marked verified"
        UNVERIFY = "unverify", "Verification withdrawn"
        MARK_HACKED = "mark_hacked", "Marked hacked"
        CLEAR_HACKED = "clear_hacked", "Hacked mark cleared"
        RERUN = "rerun", "Re-run on the current harness"
        RELEASE = "release", "Released from review"
        REJECT = "reject", "Rejected after review"

    submission = models.ForeignKey(
        Submission, on_delete=models.CASCADE, related_name="curation_log"
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    action = models.CharField(max_length=20, choices=Action.choices)
    reason = models.TextField()
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "pk"]

    def __str__(self) -> str:
        return f"{self.get_action_display()} by {self.actor or '?'}: {self.reason}"


class StatusChange(models.Model):
    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="history")
    from_status = models.CharField(max_length=20, blank=True)
    to_status = models.CharField(max_length=20)
    note = models.TextField(blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "pk"]

    def __str__(self) -> str:
        return f"{self.from_status or '·'} → {self.to_status}"


class EvaluationRun(models.Model):
    """One attempt to evaluate a submission on one worker."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"
        # Its worker died (no heartbeat) or its message was lost; a later attempt replaced it.
        LOST = "lost", "Lost (replaced by a later attempt)"

    FINISHED_STATUSES = frozenset({Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.LOST})

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="runs")
    attempt = models.PositiveIntegerField(default=1)
    status = models.CharField(
        max_length=12, choices=Status.choices, default=Status.QUEUED, db_index=True
    )
    queue = models.CharField(max_length=80)
    worker = models.CharField(max_length=200, blank=True)
    environment = models.JSONField(default=dict, blank=True)
    harness_version = models.CharField(max_length=20, blank=True)
    shapes_total = models.PositiveIntegerField(default=0)
    shapes_done = models.PositiveIntegerField(default=0)
    error_code = models.CharField(max_length=60, blank=True)
    error_message = models.TextField(blank=True)
    # The candidate's own output (prints, warnings), kept as a log, never parsed.
    log_tail = models.TextField(blank=True)
    # The evaluator's results.json, as written.
    results = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # How many shards its operators were split into (``Shard``): one or more for a run
    # evaluated here, each claimed, heartbeated and re-sent on its own. 0: no shards
    # (results imported from elsewhere, or a run finished before every run had shards).
    shard_count = models.PositiveSmallIntegerField(default=0)
    # The secret seed of the evaluator's inputs, the same for every shard; never shown.
    seed = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["submission", "attempt"], name="run_attempt_unique")
        ]

    def __str__(self) -> str:
        return f"run {self.pk} of submission {self.submission_id} (attempt {self.attempt})"


class OperatorResult(models.Model):
    run = models.ForeignKey(
        EvaluationRun, on_delete=models.CASCADE, related_name="operator_results"
    )
    operator = models.CharField(max_length=60)
    status = models.CharField(max_length=20)
    score = models.FloatField(default=0.0)
    importance = models.FloatField(default=0.0)
    error = models.TextField(blank=True)
    warnings = models.JSONField(default=list, blank=True)
    # Seconds the operator's evaluation child ran (start-up included); what the shard
    # planner learns each operator's cost from (``submissions.run_split.operator_costs``).
    wall_s = models.FloatField(null=True, blank=True)
    # The per-operator verdict (evaluator.scoring.OPERATOR_VERDICTS: held, incorrect, pass,
    # partial, fallback, failed) and its counts: shapes, shapes whose status is pass (the
    # apparent passes, per shape), the same counted per operator (0 when it is incorrect:
    # the real passes), the shapes that returned a wrong result, and the codes
    # (evaluator.verdicts) of the signs of deception found on its shapes.
    verdict = models.CharField(max_length=12, blank=True)
    shapes_total = models.PositiveIntegerField(default=0)
    apparent_passes = models.PositiveIntegerField(default=0)
    real_passes = models.PositiveIntegerField(default=0)
    wrong_shapes = models.JSONField(default=list, blank=True)
    hold_codes = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-importance", "operator"]
        constraints = [
            models.UniqueConstraint(fields=["run", "operator"], name="operator_result_unique")
        ]

    def __str__(self) -> str:
        return f"{self.operator}: {self.status}"


class ShapeResult(models.Model):
    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="shape_results")
    operator = models.CharField(max_length=60)
    shape_id = models.CharField(max_length=40)
    status = models.CharField(max_length=20)
    weight = models.FloatField(default=1.0)
    time_ms = models.FloatField(null=True)
    time_spread_ms = models.FloatField(null=True)
    reps = models.PositiveIntegerField(null=True)
    reference_time_ms = models.FloatField(null=True)
    t_sol_ms = models.FloatField(null=True)
    roofline_fraction = models.FloatField(null=True)
    speedup = models.FloatField(null=True)
    own_kernel_share = models.FloatField(null=True)
    max_abs_error = models.FloatField(null=True)
    error = models.TextField(blank=True)
    # What the harness found on the shape: verdict codes of evaluator.verdicts.
    codes = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["operator", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "operator", "shape_id"], name="shape_result_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.operator}/{self.shape_id}: {self.status}"


class Shard(models.Model):
    """One part of a run's operators, evaluated by one worker (``submissions.shards``).

    Every run has one or more; a run that is not split is one shard of every operator. Its
    run's id is sent to the hardware's queue once per shard, so free workers take them in
    parallel; the last shard to succeed merges them all into the run.
    A lost or failed shard is tried again alone as a new row (same ``index``, next
    ``attempt``); the others keep their results."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        # Its worker died (no heartbeat) or its message was lost; a later attempt replaced it.
        LOST = "lost", "Lost (replaced by a later attempt)"
        CANCELLED = "cancelled", "Cancelled"

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="shards")
    index = models.PositiveSmallIntegerField()
    attempt = models.PositiveSmallIntegerField(default=1)
    operators = models.JSONField(default=list)
    status = models.CharField(
        max_length=12, choices=Status.choices, default=Status.QUEUED, db_index=True
    )
    worker = models.CharField(max_length=200, blank=True)
    shapes_total = models.PositiveIntegerField(default=0)
    shapes_done = models.PositiveIntegerField(default=0)
    # This shard's results.json (its operators' entries and its worker's environment).
    results = models.JSONField(null=True, blank=True)
    error_code = models.CharField(max_length=60, blank=True)
    error_message = models.TextField(blank=True)
    log_tail = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    dispatch_count = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["run", "index", "attempt"]
        constraints = [
            models.UniqueConstraint(fields=["run", "index", "attempt"], name="shard_attempt_unique")
        ]

    def __str__(self) -> str:
        return f"shard {self.index} of run {self.run_id} (attempt {self.attempt})"


class Score(models.Model):
    """A published result: one row per submission on the board, stored denormalised at
    publish time so that the board never recomputes scores per request."""

    submission = models.OneToOneField(Submission, on_delete=models.CASCADE, related_name="score")
    run = models.ForeignKey(EvaluationRun, on_delete=models.PROTECT, related_name="+")
    suite_version = models.ForeignKey(
        "catalogue.SuiteVersion", on_delete=models.PROTECT, related_name="scores"
    )
    hardware = models.ForeignKey(
        "catalogue.HardwareProfile", on_delete=models.PROTECT, related_name="scores"
    )
    aggregate = models.FloatField()
    aggregate_ci_low = models.FloatField(null=True)
    aggregate_ci_high = models.FloatField(null=True)
    apparent_pass_rate = models.FloatField()
    real_pass_rate = models.FloatField()
    fallback_rate = models.FloatField()
    geomean_speedup_eager = models.FloatField(null=True)
    # Against the torch.compile baseline of the same suite version and hardware, over the
    # shapes that both ran (None until that baseline is published).
    geomean_speedup_compile = models.FloatField(null=True)
    # operator slug -> operator score
    operator_scores = models.JSONField(default=dict)
    # operator slug -> per-operator verdict (evaluator.scoring.OPERATOR_VERDICTS)
    operator_verdicts = models.JSONField(default=dict)
    # Passing shapes counted per shape (apparent) and per operator (real: none of an
    # operator that returned a wrong result on any shape); null on rows published before.
    shapes_total = models.PositiveIntegerField(null=True)
    shapes_passed_apparent = models.PositiveIntegerField(null=True)
    shapes_passed_real = models.PositiveIntegerField(null=True)
    published_at = models.DateTimeField()

    class Meta:
        # The table (and its index) kept the names they had under ``leaderboard``.
        db_table = "leaderboard_score"
        indexes = [
            models.Index(
                fields=["suite_version", "hardware", "-aggregate"],
                name="leaderboard_suite_v_35ea12_idx",
            )
        ]

    def __str__(self) -> str:
        return f"{self.submission_id}: {roofline_percent(self.aggregate)} of the roofline"
