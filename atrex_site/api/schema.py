"""drf-spectacular hooks."""

from __future__ import annotations

from typing import Any

PRIVATE_PREFIXES = ("/api/staff/",)


def public_endpoints_only(endpoints: list[tuple[Any, ...]], **kwargs: Any) -> list[tuple[Any, ...]]:
    """Leave the staff curation API out of the public schema (it is documented for admins in
    docs/curating.md and is not a researcher's interface)."""
    return [entry for entry in endpoints if not entry[0].startswith(PRIVATE_PREFIXES)]
