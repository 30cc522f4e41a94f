"""One row per Celery worker process (one per GPU on GPU nodes), written by the worker
itself when it starts and at every heartbeat (``fleet.worker``)."""

from __future__ import annotations

from django.db import models


class WorkerNode(models.Model):
    class Status(models.TextChoices):
        STARTING = "starting", "Starting (measuring its ceilings)"
        ONLINE = "online", "Online"
        STOPPED = "stopped", "Stopped (shut down cleanly)"
        LOST = "lost", "Lost (no heartbeat)"

    class CeilingsStatus(models.TextChoices):
        PENDING = "pending", "Being measured"
        MEASURED = "measured", "Measured"
        FAILED = "failed", "Measurement failed"
        NOT_MEASURED = "not_measured", "Not measured (no evaluation queue)"

    # Celery's node name (``gpu3@node7``): unique per running worker process.
    name = models.CharField(max_length=200, unique=True)
    hostname = models.CharField(max_length=200)
    pid = models.PositiveIntegerField(null=True, blank=True)
    queues = models.JSONField(default=list)
    # The hardware profile its evaluation queue serves (``eval.<slug>``); blank for a
    # worker that only does site work.
    hardware_profile = models.CharField(max_length=50, blank=True, db_index=True)
    device = models.CharField(max_length=8, blank=True)
    cuda_visible_devices = models.CharField(max_length=100, blank=True)
    concurrency = models.PositiveIntegerField(null=True, blank=True)
    gpu_name = models.CharField(max_length=200, blank=True)
    driver = models.CharField(max_length=50, blank=True)
    clocks = models.JSONField(null=True, blank=True)
    torch_version = models.CharField(max_length=50, blank=True)
    triton_version = models.CharField(max_length=50, blank=True)
    python_version = models.CharField(max_length=30, blank=True)
    harness_version = models.CharField(max_length=30, blank=True)
    celery_version = models.CharField(max_length=30, blank=True)
    ceilings_status = models.CharField(
        max_length=14, choices=CeilingsStatus.choices, default=CeilingsStatus.PENDING
    )
    copy_bytes_per_s = models.FloatField(null=True, blank=True)
    bf16_gemm_flops_per_s = models.FloatField(null=True, blank=True)
    # The whole ``atrex-ceilings/1`` document, or the reason it could not be measured.
    ceilings = models.JSONField(null=True, blank=True)
    ceilings_error = models.TextField(blank=True)
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.STARTING, db_index=True
    )
    started_at = models.DateTimeField()
    last_heartbeat_at = models.DateTimeField()
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["hardware_profile", "name"]

    def __str__(self) -> str:
        return self.name
