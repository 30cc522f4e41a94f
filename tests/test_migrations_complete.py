"""Every model change has its migration: ``makemigrations --check --dry-run`` in the test
process, where Django is already set up (``make test`` once ran it as a process of its
own before pytest: about 9 s of CPU on a fresh clone, most of it importing the site)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command


@pytest.mark.django_db  # makemigrations reads the applied migrations' history
def test_every_model_change_has_its_migration():
    written = io.StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=written, stderr=written)
    except SystemExit:  # --check exits 1 when a migration is missing
        pytest.fail(f"models changed without a migration:\n{written.getvalue()}")
    assert "No changes detected" in written.getvalue()
