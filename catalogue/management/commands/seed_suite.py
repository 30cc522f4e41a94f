"""Load the built-in hardware profiles and suite files into the catalogue (idempotent)."""

from django.core.management.base import BaseCommand, CommandError

from catalogue.services import CurationError, hardware_profiles_sync, suite_version_import
from evaluator.errors import AtrexError
from evaluator.suite import list_suites, load_suite


class Command(BaseCommand):
    help = "Load hardware profiles and suite files (default: every suite the evaluator ships)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("suites", nargs="*", help="suite names or paths to suite files")

    def handle(self, *args, suites: list[str], **options) -> None:
        profiles = hardware_profiles_sync()
        self.stdout.write(f"hardware profiles: {', '.join(p.slug for p in profiles)}")
        for name in suites or list_suites():
            try:
                version = suite_version_import(suite=load_suite(name))
            except AtrexError as error:
                raise CommandError(f"{name}: {error.message}") from error
            except CurationError as error:
                raise CommandError(
                    f"{name}: {str(error).rstrip('.')}. The suite file differs from the "
                    "version this database already published (published versions never "
                    "change): give the file a new version, or, on a development database, "
                    "start afresh (rm -r var/)."
                ) from error
            shapes, digest = version.shapes.count(), version.content_hash[:19]
            self.stdout.write(f"suite {version.slug}: {shapes} shapes, {digest}…")
