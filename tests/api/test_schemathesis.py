"""Property-based checks of the whole public API against its own OpenAPI schema
(schemathesis): for each operation, a bounded number of generated requests, as a
researcher with a token; no answer may be a server error, and every answer must match the
schema of its status code.

The examples are derandomised (the same requests every run) and bounded
(``MAX_EXAMPLES`` per operation), so the run is reproducible and stays well under a minute.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from accounts.services import api_token_create
from tests.factories import UserFactory

MAX_EXAMPLES = 10

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())


@pytest.fixture
def keep_the_test_connection():
    """Django closes the database connection when a request finishes; inside a test's
    transaction that would close it under the test (Django's own test client does the
    same as this)."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def board(publish, keep_the_test_connection):
    """A published board row and a private submission, so that lists and details have
    something to serialise."""
    publish(fraction=0.4, title="public kernels")
    publish(fraction=0.6, title="private kernels", visibility="private")


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_answers_match_the_schema_and_never_fail(case, board):
    # A fresh token per request: DELETE /api/tokens/ revokes the one it is made with.
    secret = api_token_create(user=UserFactory()).secret
    case.call_and_validate(
        headers={"Authorization": f"Token {secret}"},
        checks=[not_a_server_error, response_schema_conformance],
    )
