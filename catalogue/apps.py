from django.apps import AppConfig


class CatalogueConfig(AppConfig):
    """The suite catalogue: hardware profiles, operators, suite versions and their curation.

    The lowest floor of the site's apps: it imports neither ``submissions`` nor
    ``leaderboard`` (``tests/test_import_graph.py`` holds it to that).
    """

    name = "catalogue"
    verbose_name = "Suite catalogue"
