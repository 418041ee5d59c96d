"""The proxy's key check fails closed. It used to run inside the memory budget
(``NYLON_PROXY_BUDGET_MS``, 300 ms) and any failure but a bad key or a rate-limit refusal, the
budget's own timeout included, sent the caller's request upstream unauthenticated: under 200
concurrent requests with an invalid ``X-Nylon-Key`` dozens reached the upstream and got its 200.
Now a key that could not be checked is a 503 with Retry-After and nothing goes upstream; only the
memory context fails open (the request then goes through, authenticated, without memory).

In process: the view under Django's AsyncClient, the upstream an httpx MockTransport that records
what reached it; the key check's database is made slow for real, by a lock on the key table."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import httpx
import pytest
from django.db import OperationalError, connections
from django.test import AsyncClient

from proxy import views
from teams import services
from teams.auth import actor_for_user
from teams.models import ApiKey

# the proxy checks the key in executor threads: they must see the world
pytestmark = pytest.mark.django_db(transaction=True)

OPENAI_URL = "/proxy/openai/v1/chat/completions"
MODELS_URL = "/proxy/openai/v1/models"
BODY = {"model": "gpt-test", "messages": [{"role": "user", "content": "When does the staging password rotate?"}]}
ANSWER = {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test", "choices": [
    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Mondays."}}]}
BAD_KEY = "nyl_deadbeef_notarealkeyatallxxxxxxxxxxxxxxxx"


@pytest.fixture
def upstream(monkeypatch) -> list[httpx.Request]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": []})
        return httpx.Response(200, json=ANSWER)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    monkeypatch.setattr(views, "_upstream_client", lambda: client)
    # No stats or write-back (not under test): their threads would race the flush at teardown.
    monkeypatch.setattr(views, "_background", lambda fn, /, *args, **kwargs: None)
    return seen


def _call(method: str, url: str, key: str):
    async def go():
        client = AsyncClient(raise_request_exception=False)
        headers = {"X-Nylon-Key": key, "Authorization": "Bearer sk-up"}
        if method == "GET":
            return await client.get(url, headers=headers)
        return await client.post(url, data=json.dumps(BODY), content_type="application/json", headers=headers)

    return asyncio.run(go())


def _assert_unavailable(r) -> None:
    assert r.status_code == 503, r.content[:300]
    assert r["Content-Type"] == "application/json" and int(r["Retry-After"]) >= 1
    assert r.json()["error"]["code"] == "unavailable"


def test_a_bad_or_revoked_key_is_refused_even_with_no_time_left_for_memory(world, upstream, settings):
    """The audit's flood in one request: a budget spent before the key check finished (here: none
    at all) passed the request through. The key is still checked; only the memory is skipped."""
    settings.NYLON_PROXY_BUDGET_MS = 0
    a = world["a"]
    for method, url in (("POST", OPENAI_URL), ("GET", MODELS_URL)):
        r = _call(method, url, BAD_KEY)
        assert r.status_code == 401 and r.json()["error"]["code"] == "authentication_failed", r.content[:300]
    assert upstream == []

    # a valid key goes through, without memory: the context is what fails open
    r = _call("POST", OPENAI_URL, a.key)
    assert r.status_code == 200 and r["X-Nylon-Memory"] == "none", r.content[:300]
    assert len(upstream) == 1

    # ...until it is revoked
    row = ApiKey.objects.get(agent=a.agent)
    services.api_key_revoke(actor=actor_for_user(a.owner, a.org), key=row)
    for method, url in (("POST", OPENAI_URL), ("GET", MODELS_URL)):
        assert _call(method, url, a.key).status_code == 401
    assert len(upstream) == 1


@pytest.fixture
def key_table_locked(monkeypatch) -> Iterator[threading.Event]:
    """The key table locked by another connection, so the key check blocks in the database as it
    does behind a saturated pool or a stuck Postgres. Yields an event set when every key check
    started meanwhile has finished (they finish once the lock goes, before the tables are flushed)."""
    checks = {"running": 0}
    done = threading.Event()
    done.set()
    guard = threading.Lock()
    real = views._authenticate

    def tracked(raw_key: str):
        with guard:
            checks["running"] += 1
            done.clear()
        try:
            return real(raw_key)
        finally:
            with guard:
                checks["running"] -= 1
                if not checks["running"]:
                    done.set()

    monkeypatch.setattr(views, "_authenticate", tracked)
    monkeypatch.setattr(views, "AUTH_TIMEOUT_SECS", 0.5, raising=False)  # absent before the fix
    locker = connections.create_connection("default")
    locker.set_autocommit(False)
    with locker.cursor() as cur:
        cur.execute(f"LOCK TABLE {ApiKey._meta.db_table} IN ACCESS EXCLUSIVE MODE")
    try:
        yield done
    finally:
        locker.rollback()
        locker.close()
        assert done.wait(20), "a key check did not finish after the lock was released"


def test_a_key_check_that_cannot_finish_is_a_503_and_nothing_goes_upstream(world, upstream, settings,
                                                                           key_table_locked):
    settings.NYLON_PROXY_BUDGET_MS = 300  # the default: before, its timeout passed the request through
    for key in (BAD_KEY, world["a"].key):
        _assert_unavailable(_call("POST", OPENAI_URL, key))
        _assert_unavailable(_call("GET", MODELS_URL, key))
    assert upstream == []


def test_a_key_check_that_fails_is_a_503_and_nothing_goes_upstream(world, upstream, monkeypatch):
    """The database refusing the look-up (the pool's timeout, Postgres restarting): the model list
    relay passed the request through on any such error."""

    def failing(raw_key: str):
        raise OperationalError("connection pool exhausted")

    monkeypatch.setattr(views, "_authenticate", failing)
    for method, url in (("POST", OPENAI_URL), ("GET", MODELS_URL), ("POST", "/proxy/anthropic/v1/messages")):
        _assert_unavailable(_call(method, url, BAD_KEY))
    assert upstream == []
