"""The suite catalogue: operators, hardware profiles, suite versions and their shapes.

A published suite version is immutable: its ``definition`` is the exact suite file the
evaluator runs, content-hashed; the Operator/Shape rows are a browsable copy of it.

The tables keep the names they had when these models lived in ``leaderboard`` (the move
changed no data), hence the explicit ``db_table``.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models


class HardwareProfile(models.Model):
    class DeviceKind(models.TextChoices):
        CUDA = "cuda", "CUDA GPU"
        CPU = "cpu", "CPU (development)"

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=120)
    device_kind = models.CharField(max_length=8, choices=DeviceKind.choices)
    # Execution path (bf16_tc, fp16_tc, fp8_e4m3_tc, fp32_tf32_tc, fp32_strict) -> FLOP/s.
    peak_flops = models.JSONField()
    hbm_bytes_per_s = models.FloatField()
    source = models.CharField(max_length=200)
    notes = models.TextField(blank=True)
    enabled = models.BooleanField(default=True)

    class Meta:
        db_table = "leaderboard_hardwareprofile"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def queue(self) -> str:
        """The Celery queue whose workers run on this hardware."""
        return f"eval.{self.slug}"


class Operator(models.Model):
    slug = models.SlugField(unique=True)
    atrex_id = models.CharField(max_length=20, blank=True)
    description = models.TextField(blank=True)
    dtype = models.CharField(max_length=20, blank=True)
    phase = models.CharField(max_length=20, blank=True)
    enabled = models.BooleanField(default=True)

    class Meta:
        db_table = "leaderboard_operator"
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class SuiteVersion(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        PUBLISHED = "published", "Published"

    name = models.CharField(max_length=80)
    version = models.CharField(max_length=40)
    description = models.TextField(blank=True)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.DRAFT)
    content_hash = models.CharField(max_length=80, unique=True)
    # The suite file (format atrex-suite/1) that the evaluator runs, exactly.
    definition = models.JSONField()
    threshold_own_share = models.FloatField(default=0.8)
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)
    # The version a draft was copied from (what its diff is shown against).
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        db_table = "leaderboard_suiteversion"
        ordering = ["name", "-published_at"]
        constraints = [
            models.UniqueConstraint(fields=["name", "version"], name="suite_name_version_unique")
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.version}"

    @property
    def slug(self) -> str:
        return f"{self.name}-{self.version}"

    @property
    def is_published(self) -> bool:
        return self.status == self.Status.PUBLISHED


class SuiteOperator(models.Model):
    suite_version = models.ForeignKey(
        SuiteVersion, on_delete=models.CASCADE, related_name="suite_operators"
    )
    operator = models.ForeignKey(Operator, on_delete=models.PROTECT, related_name="+")
    importance = models.FloatField(
        validators=[MinValueValidator(0.0)],
        help_text="Relative weight of the operator; renormalised to sum to 1 on publish.",
    )
    importance_raw = models.FloatField(default=0.0)
    enabled = models.BooleanField(
        default=True, help_text="Disabled operators are left out of the published suite."
    )
    description = models.TextField(blank=True)
    # Importance normalised over a version's enabled operators; set on the rows that
    # catalogue.services reads for a diff or a build, never stored.
    effective_importance: float
    # For an operator the evaluator does not implement: {"reference.py": ..., "input.py": ...}
    # from an upstream-format upload. Stored and shipped to workers, never run by the site.
    sources = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "leaderboard_suiteoperator"
        ordering = ["-importance"]
        constraints = [
            models.UniqueConstraint(
                fields=["suite_version", "operator"], name="suite_operator_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.operator.slug} in {self.suite_version}"


class Shape(models.Model):
    class Visibility(models.TextChoices):
        PUBLIC = "public", "Public"
        HIDDEN = "hidden", "Hidden (scored, never shown to agents)"

    suite_version = models.ForeignKey(SuiteVersion, on_delete=models.CASCADE, related_name="shapes")
    operator = models.ForeignKey(Operator, on_delete=models.PROTECT, related_name="shapes")
    shape_id = models.CharField(max_length=40)
    init_kwargs = models.JSONField(default=dict)
    input_kwargs = models.JSONField(default=dict)
    weight = models.FloatField(default=1.0, validators=[MinValueValidator(0.0)])
    w_flops = models.JSONField(default=dict)
    q_read = models.BigIntegerField()
    q_write = models.BigIntegerField()
    visibility = models.CharField(
        max_length=8, choices=Visibility.choices, default=Visibility.PUBLIC
    )
    smoke = models.BooleanField(default=False)
    enabled = models.BooleanField(
        default=True, help_text="Disabled shapes are left out of the published suite."
    )
    source = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)

    class Meta:
        db_table = "leaderboard_shape"
        ordering = ["operator__slug", "shape_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["suite_version", "operator", "shape_id"], name="shape_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.operator.slug}/{self.shape_id} ({self.suite_version})"
