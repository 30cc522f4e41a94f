from django.apps import AppConfig


class LeaderboardConfig(AppConfig):
    name = "leaderboard"
    verbose_name = "Leaderboard and suite catalogue"

    def ready(self) -> None:
        # Whatever changes what the public pages show retires their cached copies.
        from django.db.models.signals import post_delete, post_save

        from submissions.models import CurationLog, StatusChange, Submission

        from . import models
        from .page_cache import board_changed

        for model in (
            models.Score,
            models.SuiteVersion,
            models.SuiteOperator,
            models.Shape,
            models.HardwareProfile,
            Submission,
            CurationLog,
        ):
            uid = f"board:{model.__name__}"
            post_save.connect(board_changed, sender=model, dispatch_uid=uid)
            post_delete.connect(board_changed, sender=model, dispatch_uid=f"{uid}:delete")
        post_save.connect(_status_changed, sender=StatusChange, dispatch_uid="board:status")


def _status_changed(instance, **kwargs) -> None:
    """Moves onto or off the board (to or from ``published``) retire the cached pages."""
    from .page_cache import board_changed

    if "published" in (instance.from_status, instance.to_status):
        board_changed()
