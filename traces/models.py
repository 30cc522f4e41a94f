"""Production profiles (traces) of applications, what they map to, and the suite
proposals derived from them.

A trace is kept whatever happens to it (``status`` says whether it was imported, and why
not); its mapped rows and unmapped time exist only for an imported trace, written in one
transaction with the status change, so a failed import leaves no rows behind.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models

from evaluator.figures import significant


class Application(models.Model):
    """A production application whose GPU time the traces sample, with its size in
    card-hours (GPU-hours over the period the weights stand for)."""

    name = models.CharField(max_length=120, unique=True)
    card_hours = models.FloatField(validators=[MinValueValidator(0.0)])
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({significant(self.card_hours)} card-hours)"


class Trace(models.Model):
    class Status(models.TextChoices):
        RECEIVED = "received", "Received"
        IMPORTED = "imported", "Imported"
        FAILED = "failed", "Failed (nothing imported)"

    class Format(models.TextChoices):
        AUTO = "auto", "Detect"
        KINETO = "kineto", "torch.profiler JSON (Kineto)"
        CSV = "csv", "CSV"

    application = models.ForeignKey(
        Application,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="traces",
        help_text="The application the trace belongs to (a CSV may name others per row).",
    )
    upload = models.FileField(upload_to="traces/%Y/%m/", max_length=300)
    original_name = models.CharField(max_length=255)
    size_bytes = models.BigIntegerField(default=0)
    sha256 = models.CharField(max_length=64)
    format = models.CharField(max_length=8, choices=Format.choices, default=Format.AUTO)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RECEIVED)
    error_code = models.CharField(max_length=40, blank=True)
    error_message = models.TextField(blank=True)
    # "gpu-kernels", "cpu-ops" (a recording without device activity) or "csv".
    time_basis = models.CharField(max_length=16, blank=True)
    total_time_us = models.FloatField(default=0.0)
    mapped_time_us = models.FloatField(default=0.0)
    # Where the trace comes from: the uploader's note, the recording's own metadata
    # (scripts/record_trace.py writes it into the trace), devices, event counts.
    provenance = models.JSONField(default=dict, blank=True)
    # The mapping rules used (a table), so the mapping can be read back later.
    rules = models.JSONField(default=list, blank=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    imported_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"trace #{self.pk} {self.original_name}"

    @property
    def unmapped_time_us(self) -> float:
        return max(0.0, self.total_time_us - self.mapped_time_us)

    @property
    def coverage(self) -> float | None:
        """Share of the trace's time that the mapping attributed to suite operators."""
        return self.mapped_time_us / self.total_time_us if self.total_time_us > 0 else None


class TraceRow(models.Model):
    """GPU time of one (application, operator, shape) in one trace."""

    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="rows")
    application = models.ForeignKey(Application, on_delete=models.PROTECT, related_name="+")
    operator = models.CharField(max_length=80)
    init_kwargs = models.JSONField(default=dict)
    input_kwargs = models.JSONField(default=dict)
    shape_key = models.TextField()
    calls = models.BigIntegerField(default=0)
    time_us = models.FloatField()
    sources = models.JSONField(default=list, blank=True)
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["-time_us"]
        indexes = [models.Index(fields=["trace", "operator"])]

    def __str__(self) -> str:
        return f"{self.operator} {self.input_kwargs}"


class UnmappedTime(models.Model):
    """Time of a trace that no rule mapped (or whose shape could not be derived)."""

    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="unmapped")
    application = models.ForeignKey(Application, on_delete=models.PROTECT, related_name="+")
    name = models.CharField(max_length=255)
    reason = models.TextField()
    calls = models.BigIntegerField(default=0)
    time_us = models.FloatField()

    class Meta:
        ordering = ["-time_us"]

    def __str__(self) -> str:
        return f"{self.name}: {self.reason}"


class Proposal(models.Model):
    """A draft suite version derived from imported traces, with what went into it."""

    draft = models.OneToOneField(
        "catalogue.SuiteVersion", on_delete=models.CASCADE, related_name="trace_proposal"
    )
    base = models.ForeignKey("catalogue.SuiteVersion", on_delete=models.PROTECT, related_name="+")
    traces = models.ManyToManyField(Trace, related_name="proposals")
    parameters = models.JSONField(default=dict)
    # Weights, importance, kept/snapped/new/skipped shapes, coverage: see traces.proposal.
    summary = models.JSONField(default=dict)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"proposal {self.draft}"
