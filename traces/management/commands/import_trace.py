"""``manage.py import_trace FILE... --application NAME [--card-hours N]``: import production
traces (torch.profiler JSON, gzipped or not, or the trace CSV) and print what was mapped."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluator.figures import duration_ms, percent
from traces import services
from traces.mapping import RulesError, load_rules
from traces.models import Trace


class Command(BaseCommand):
    help = "Import production traces (torch.profiler JSON/.json.gz or CSV) of an application."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", help="trace files")
        parser.add_argument(
            "--application",
            help="the application the traces belong to (a CSV may name its own per row)",
        )
        parser.add_argument(
            "--card-hours",
            type=float,
            default=None,
            help="the application's card-hours (required to create it; updates it otherwise)",
        )
        parser.add_argument(
            "--format", choices=[f for f, _ in Trace.Format.choices], default="auto"
        )
        parser.add_argument("--notes", default="", help="provenance: where the trace comes from")
        parser.add_argument("--rules", help="a JSON file of mapping rules (default: built in)")

    def handle(self, *args, **options) -> None:
        rules = None
        if options["rules"]:
            try:
                rules = load_rules(Path(options["rules"]).read_text(encoding="utf-8"))
            except (OSError, RulesError) as error:
                raise CommandError(str(getattr(error, "message", error))) from None
        application = None
        try:
            if options["application"]:
                application = services.application_upsert(
                    name=options["application"], card_hours=options["card_hours"]
                )
        except services.TraceImportError as error:
            raise CommandError(error.message) from None
        failed = 0
        for raw in options["paths"]:
            path = Path(raw)
            if not path.is_file():
                raise CommandError(f"{path}: no such file")
            try:
                with path.open("rb") as stream:
                    trace = services.trace_upload(
                        upload=stream,
                        name=path.name,
                        application=application,
                        format=options["format"],
                        notes=options["notes"],
                        rules=rules,
                    )
            except services.TraceImportError as error:
                failed += 1
                kept = f" (kept as trace #{error.trace.pk}, failed)" if error.trace else ""
                self.stderr.write(f"{path}: {error.message} [{error.code}]{kept}")
                continue
            self.stdout.write(
                f"trace #{trace.pk} {path.name}: {trace.rows.count()} shapes; "
                f"{duration_ms(trace.mapped_time_us / 1e3)} of "
                f"{duration_ms(trace.total_time_us / 1e3)} "
                f"({trace.time_basis}) mapped = {percent(trace.coverage or 0)}"
            )
            for row in trace.unmapped.all()[:5]:
                self.stdout.write(
                    f"  unmapped {duration_ms(row.time_us / 1e3)}: {row.name} ({row.reason})"
                )
        if failed:
            raise CommandError(f"{failed} of {len(options['paths'])} trace(s) were not imported.")
