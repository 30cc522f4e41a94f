from django.apps import AppConfig


class LeaderboardConfig(AppConfig):
    """The public board: read-only pages, API and charts over ``catalogue`` and
    ``submissions``. The top floor: nothing below imports it."""

    name = "leaderboard"
    verbose_name = "Leaderboard"

    def ready(self) -> None:
        # Whatever changes what the public pages show retires their cached copies.
        from django.db.models.signals import post_delete, post_save

        from atrex_site.page_cache import board_changed
        from catalogue.models import HardwareProfile, Shape, SuiteOperator, SuiteVersion
        from submissions.models import CurationLog, Score, StatusChange, Submission
        from submissions.scores import scores_changed

        for model in (
            Score,
            SuiteVersion,
            SuiteOperator,
            Shape,
            HardwareProfile,
            Submission,
            CurationLog,
        ):
            uid = f"board:{model.__name__}"
            post_save.connect(board_changed, sender=model, dispatch_uid=uid)
            post_delete.connect(board_changed, sender=model, dispatch_uid=f"{uid}:delete")
        post_save.connect(_status_changed, sender=StatusChange, dispatch_uid="board:status")
        scores_changed.connect(board_changed, dispatch_uid="board:scores-changed")


def _status_changed(instance, **kwargs) -> None:
    """Moves onto or off the board (to or from ``published``) retire the cached pages."""
    from atrex_site.page_cache import board_changed

    if "published" in (instance.from_status, instance.to_status):
        board_changed()
