"""A proxied request whose upstream failed (answered 502 ``upstream_unavailable``, or a stream ended
with the protocol's error event) is a request in the agent's proxy stats, counted as
``upstream_failed``. Only answered requests reached the stats: ``GET proxy/stats`` said 0 requests
after a failure."""

from __future__ import annotations

import threading

import httpx
import pytest

from proxy import stats, views

from .inprocess import call
from .test_upstream_failures import MESSAGES, OPENAI_URL, _BreaksAfter

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def upstream(monkeypatch, settings):
    settings.NYLON_PROXY_BUDGET_MS = 20000  # the first request of an org builds its cache

    def install(handler):
        client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        monkeypatch.setattr(views, "_upstream_client", lambda: client)

    def at_once(fn, /, *args, request_id=None):
        # stats and write-back done before the answer returns, so the test reads them after it
        # (a thread of their own, as the executor's: the ORM refuses the event loop's)
        worker = threading.Thread(target=views._db_call(fn, *args, request_id=request_id))
        worker.start()
        worker.join()

    monkeypatch.setattr(views, "_background", at_once)
    return install


def _counts(world) -> dict:
    agent = world["a"].agent
    return stats.read(agent.org_id, agent.id)


def _refused(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused")


@pytest.mark.parametrize("handler", [
    _refused,
    lambda request: httpx.Response(200, headers={"content-type": "application/json"},
                                   stream=_BreaksAfter([b'{"id": "chatcmpl-1", "cho'])),
    lambda request: httpx.Response(200, headers={"content-type": "text/event-stream"},
                                   stream=_BreaksAfter([b'data: {"id": "c", "obj'])),
], ids=["connecting", "reading", "mid-stream"])
def test_a_failed_upstream_is_a_request_counted_as_failed(world, upstream, handler):
    before = _counts(world)
    upstream(handler)
    body = {"model": "gpt-test", "messages": MESSAGES, "stream": True}
    response, _ = call(world, "POST", OPENAI_URL, body)
    assert response.status_code in (200, 502)
    after = _counts(world)
    assert after["requests"] == before["requests"] + 1
    assert after["upstream_failed"] == before["upstream_failed"] + 1
    assert after["injected"] == before["injected"] + 1  # memory was built and sent all the same


def test_an_answered_request_is_not_counted_as_failed(world, upstream):
    before = _counts(world)
    upstream(lambda request: httpx.Response(200, json={"id": "x", "object": "chat.completion", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Mondays."}}]},
        headers={"server": "BaseHTTP/0.6 Python/3.11", "date": "Mon, 01 Jan 2024 00:00:00 GMT"}))
    response, _ = call(world, "POST", OPENAI_URL, {"model": "gpt-test", "messages": MESSAGES})
    assert response.status_code == 200
    # the upstream's Server and Date are not relayed: the serving process sets its own
    assert not response.has_header("Server") and not response.has_header("Date")
    after = _counts(world)
    assert after["requests"] == before["requests"] + 1 and after["upstream_failed"] == before["upstream_failed"]
