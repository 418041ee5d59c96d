from __future__ import annotations

import pytest

from nylon_project.live import start_live_server


@pytest.fixture(scope="session")
def nylon_server(django_db_setup, django_db_blocker):
    """The real service (uvicorn) on the test database; no background tasks."""
    server = start_live_server()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def limited_server(django_db_setup, django_db_blocker):
    """The same service with a tiny per-key rate limit."""
    server = start_live_server(NYLON_RATE_LIMIT="5/min")
    yield server
    server.stop()
