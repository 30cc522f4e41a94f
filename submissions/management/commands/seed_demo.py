"""Submit the example bundles and evaluate them here, so the board has rows from the start.

Idempotent: a bundle already submitted by the examples account (same content) is skipped.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management.base import BaseCommand

from submissions import services
from submissions.demo import DEMO_BUNDLES, EXAMPLE_BUNDLES_DIR, zip_folder
from submissions.models import Submission


class Command(BaseCommand):
    help = "Submit and evaluate the example bundles as the 'atrex-examples' account."

    def handle(self, *args, **options) -> None:
        owner, _ = get_user_model().objects.get_or_create(username="atrex-examples")
        for folder_name, is_baseline in DEMO_BUNDLES:
            data = zip_folder(EXAMPLE_BUNDLES_DIR / folder_name)
            upload = SimpleUploadedFile(f"{folder_name}.zip", data, "application/zip")
            existing = Submission.objects.filter(
                owner=owner, upload_name=upload.name, status=Submission.Status.PUBLISHED
            ).first()
            if existing is not None:
                self.stdout.write(f"{folder_name}: already published as #{existing.pk}")
                continue
            submission = services.submission_create(
                owner=owner, upload=upload, is_baseline=is_baseline
            )
            run = submission.runs.order_by("-attempt").first()
            if run is None:
                self.stderr.write(f"{folder_name}: {submission.status}: {submission.error_message}")
                continue
            self.stdout.write(f"{folder_name}: evaluating #{submission.pk} …")
            services.evaluation_run_execute(run_id=run.pk)
            submission.refresh_from_db()
            self.stdout.write(f"{folder_name}: {submission.status} {submission.error_message}")
