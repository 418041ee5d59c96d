from __future__ import annotations

import pytest

from nylon_project.live import start_live_server

from .upstream import ScriptedUpstream


@pytest.fixture(scope="session")
def upstream():
    server = ScriptedUpstream()
    yield server
    server.close()


def _proxy_env(upstream: ScriptedUpstream, **extra) -> dict:
    return {"NYLON_PROXY_OPENAI_UPSTREAM": f"{upstream.url}/v1",
            "NYLON_PROXY_ANTHROPIC_UPSTREAM": f"{upstream.url}/v1", **extra}


@pytest.fixture(scope="session")
def proxy_server(django_db_setup, django_db_blocker, celery_worker_process, upstream):
    """The real service with the proxy pointed at the scripted upstream; write-backs go through the
    real Celery worker. The budget is generous: the first request of an org builds its cache."""
    server = start_live_server(**_proxy_env(upstream, NYLON_ENQUEUE_TASKS="1",
                                            NYLON_CELERY_QUEUE=celery_worker_process["queue"],
                                            NYLON_PROXY_BUDGET_MS="20000"))
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _write_backs_done(request):
    """A test's last proxied request queues a write-back: let the worker (or, in process, the views'
    executor) finish it (and the checks it queues) before the test's teardown empties the tables
    under it."""
    yield
    # in-process tests: the write-backs and stats steps the views left on their executor
    from proxy import views

    views.wait_background()
    if "proxy_server" in request.fixturenames:
        from tests.conftest import wait_until_worker_idle

        wait_until_worker_idle(request.getfixturevalue("celery_worker_process")["queue"])


@pytest.fixture(scope="session")
def starved_proxy_server(django_db_setup, django_db_blocker, upstream):
    """A proxy whose context budget is zero: Nylon is 'too slow' on every request."""
    server = start_live_server(**_proxy_env(upstream, NYLON_PROXY_BUDGET_MS="0"))
    yield server
    server.stop()


@pytest.fixture
def scripted(upstream):
    upstream.reset()
    return upstream
