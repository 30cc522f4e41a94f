from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts: API tokens and log-in lockouts"

    def ready(self) -> None:
        # Failed and successful log-ins (pages, HTTP Basic on the API) feed the lockout.
        from . import checks, lockout  # noqa: F401 - checks registers itself

        lockout.connect_signals()
