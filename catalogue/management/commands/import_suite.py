"""Import an upstream Atrex-Bench ``data/`` directory as a draft (or published) suite version."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from catalogue.services import CurationError, suite_version_import_release
from evaluator.upstream import UpstreamFormatError, read_release


class Command(BaseCommand):
    help = (
        "Build a suite version from an upstream data/ directory (one folder per operator "
        "with shapes.json, roofline.json, metadata.json, and reference.py + input.py for "
        "operators the evaluator does not implement; plus operator_importance.json)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("data_dir", help="the upstream data/ directory")
        parser.add_argument("--name", default="atrex-bench", help="suite name")
        parser.add_argument(
            "--label",
            dest="version_label",
            default=None,
            help="version label (default: import-<UTC time>)",
        )
        parser.add_argument("--description", default="", help="the suite's description")
        parser.add_argument("--source", default=None, help="the shapes' source line")
        parser.add_argument(
            "--publish", action="store_true", help="validate and publish (default: a draft)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        data_dir = Path(options["data_dir"])
        label = options["version_label"] or dt.datetime.now(dt.UTC).strftime("import-%Y%m%d%H%M%S")
        try:
            release = read_release(
                data_dir,
                name=options["name"],
                version=label,
                description=options["description"],
                source=options["source"],
            )
        except UpstreamFormatError as error:
            raise CommandError(
                "Nothing imported:\n" + "\n".join(f"- {p}" for p in error.problems)
            ) from error
        try:
            with transaction.atomic():
                version = suite_version_import_release(release=release, publish=options["publish"])
        except CurationError as error:
            details = "".join(f"\n- {p}" for p in error.problems)
            raise CommandError(f"Nothing imported: {error.message}{details}") from error
        uploaded = ", ".join(sorted(release.sources)) or "none"
        self.stdout.write(
            f"suite {version.slug} ({version.status}): {len(release.suite.operators)} operators, "
            f"{version.shapes.filter(smoke=False).count()} shapes "
            f"(+{version.shapes.filter(smoke=True).count()} smoke), "
            f"operators from uploaded sources: {uploaded}"
        )
