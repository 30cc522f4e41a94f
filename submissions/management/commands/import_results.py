"""Publish results measured elsewhere (a GPU batch run) as a baseline row, with provenance."""

from __future__ import annotations

import json
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from catalogue import selectors
from evaluator.errors import AtrexError
from submissions.result_import import submission_import_results


class Command(BaseCommand):
    help = "Import a results.json (or an eager-reference baseline report) as a published row."

    def add_arguments(self, parser) -> None:
        parser.add_argument("path")
        parser.add_argument("--suite", required=True, help="suite slug, e.g. atrex-bench-v1")
        parser.add_argument("--hardware", required=True, help="hardware slug, e.g. h200-sxm")
        parser.add_argument("--title", required=True)
        parser.add_argument("--dsl", default="")
        parser.add_argument("--owner", default="atrex-examples")
        parser.add_argument("--note", default="", help="provenance: where and when measured")

    def handle(self, *args, path: str, suite: str, hardware: str, title: str, dsl: str,
               owner: str, note: str, **options) -> None:  # fmt: skip
        suite_version = selectors.suite_version_pick(slug=suite)
        profile = selectors.hardware_pick(slug=hardware)
        if suite_version is None or suite_version.slug != suite or profile is None:
            raise CommandError(f"Unknown suite {suite!r} or hardware {hardware!r}.")
        try:
            report = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise CommandError(f"{path}: {error}") from error
        user, _ = get_user_model().objects.get_or_create(username=owner)
        try:
            submission = submission_import_results(
                owner=user,
                report=report,
                suite_version=suite_version,
                hardware=profile,
                title=title,
                dsl=dsl,
                provenance_note=note or f"imported from {path}",
            )
        except AtrexError as error:
            raise CommandError(error.message) from error
        self.stdout.write(f"{title}: #{submission.pk} {submission.status}")
