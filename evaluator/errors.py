"""Error hierarchy with stable codes.

User errors (``UserError``) are things the submitter must fix; they are shown in
plain words. Platform errors (``PlatformError``) are ours: they never count against a
user's quota and are the only ones that page an admin.
"""

from __future__ import annotations


class AtrexError(Exception):
    """Base class: every error carries a stable ``code`` and a plain-words ``message``."""

    code = "atrex:error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


class UserError(AtrexError):
    """Something the submitter must fix."""

    code = "user:error"


class BundleError(UserError):
    """The uploaded bundle cannot be evaluated as it is (codes ``bundle:*``)."""

    code = "bundle:invalid"


class EvaluationError(UserError):
    """The candidate failed while being evaluated (codes ``eval:*``)."""

    code = "eval:error"


class PlatformError(AtrexError):
    """Our fault: infrastructure, configuration or harness bugs (codes ``platform:*``)."""

    code = "platform:error"


class UnknownSuiteError(PlatformError):
    code = "platform:unknown-suite"


class UnknownHardwareError(PlatformError):
    code = "platform:unknown-hardware"


class UnknownOperatorError(UserError):
    code = "bundle:unknown-operator"
