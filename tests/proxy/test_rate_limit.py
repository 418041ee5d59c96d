"""One per-key rate limit across REST, MCP and the memory proxy: the proxy and the MCP tools look
keys up themselves, outside DRF, and so skipped REST's ``ActorRateThrottle`` entirely. They now
count in its budget (same rate, same cache key), and over it answer in their own shapes: the proxy
429 + Retry-After in its JSON error shape, MCP a ToolError naming the retry delay.

In process: REST through APIClient, MCP through the server's ``call_tool``, the proxy under
Django's AsyncClient with an httpx MockTransport upstream; all of them share the Redis cache."""

from __future__ import annotations

import asyncio
import json
import re

import anyio
import httpx
import pytest
from django.core.cache import cache
from django.test import AsyncClient
from mcp.server.mcpserver.exceptions import ToolError

from assets import mcp as nylon_mcp
from proxy import views
from teams.auth import ActorRateThrottle, authenticate_key

# the proxy checks the key in executor threads, the MCP tools run in worker threads: both must see the world
pytestmark = pytest.mark.django_db(transaction=True)

OPENAI_URL = "/proxy/openai/v1/chat/completions"
BODY = {"model": "gpt-test", "messages": [{"role": "user", "content": "When does the staging password rotate?"}]}
ANSWER = {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test", "choices": [
    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Mondays."}}]}
RATE = 4


@pytest.fixture
def tiny_rate(monkeypatch, world):
    """REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["actor"] at RATE/min, and the world's keys with no
    history. The dict is patched in place: DRF binds it to SimpleRateThrottle.THROTTLE_RATES when
    rest_framework.throttling is imported, so override_settings would not reach the throttle."""
    assert ActorRateThrottle.THROTTLE_RATES is not None and "actor" in ActorRateThrottle.THROTTLE_RATES
    monkeypatch.setitem(ActorRateThrottle.THROTTLE_RATES, "actor", f"{RATE}/min")
    keys = []
    for name in ("a", "b"):
        actor = authenticate_key(world[name].key)
        # key ids restart with each test database: a previous run's history may still be in Redis
        keys.append(ActorRateThrottle.cache_format % {"scope": "actor", "ident": f"key{actor.key_id}"})
    cache.delete_many(keys)
    yield
    cache.delete_many(keys)


@pytest.fixture
def upstream(monkeypatch, settings) -> list[httpx.Request]:
    settings.NYLON_PROXY_BUDGET_MS = 20000  # the first request of an org builds its cache
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=ANSWER)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    monkeypatch.setattr(views, "_upstream_client", lambda: client)
    # No stats or write-back (not under test): their threads outlive the request and would race
    # the flush of the tables at teardown.
    monkeypatch.setattr(views, "_background", lambda fn, /, *args, **kwargs: None)
    return seen


def _proxy(key: str):
    async def go():
        client = AsyncClient(raise_request_exception=False)
        return await client.post(OPENAI_URL, data=json.dumps(BODY), content_type="application/json",
                                 headers={"X-Nylon-Key": key, "Authorization": "Bearer sk-up"})

    return asyncio.run(go())


def _mcp(monkeypatch, key: str):
    monkeypatch.setattr(nylon_mcp._Auth, "stdio_key", key)
    return anyio.run(nylon_mcp.build_server().call_tool, "memory_context", {"query": "staging password"})


def test_rest_mcp_and_proxy_share_one_budget_per_key(world, client_for, tiny_rate, upstream, monkeypatch):
    a_key, b_key = world["a"].key, world["b"].key
    rest = client_for(a_key)

    # RATE requests over the three doors, one budget
    assert rest.get("/api/v1/org").status_code == 200
    _mcp(monkeypatch, a_key)
    r = _proxy(a_key)
    assert r.status_code == 200 and r["X-Nylon-Memory"] == "injected", r.content[:300]
    assert rest.get("/api/v1/org").status_code == 200
    assert len(upstream) == 1

    # ...spent: each door refuses, in its own shape
    r = rest.get("/api/v1/org")
    assert r.status_code == 429 and r.json()["error"]["code"] == "throttled"

    with pytest.raises(ToolError) as limited:
        _mcp(monkeypatch, a_key)
    m = re.search(r"Rate limited: this key is over its request rate; retry in (\d+) s\.$", str(limited.value))
    assert m and 1 <= int(m[1]) <= 60, str(limited.value)

    r = _proxy(a_key)
    assert r.status_code == 429, r.content[:300]
    assert r["Content-Type"] == "application/json"
    body = r.json()
    assert set(body) == {"error", "request_id"} and body["request_id"] == r["X-Request-Id"]
    assert body["error"]["code"] == "throttled" and body["error"]["fields"] == {}
    wait = int(r["Retry-After"])
    assert 1 <= wait <= 60 and f"retry in {wait} s" in body["error"]["message"]
    assert len(upstream) == 1  # a refused request never reaches the upstream

    # another org's key has its own budget, through every door
    r = _proxy(b_key)
    assert r.status_code == 200, r.content[:300]
    _mcp(monkeypatch, b_key)
    assert client_for(b_key).get("/api/v1/org").status_code == 200


def test_proxy_requests_alone_are_limited(world, tiny_rate, upstream):
    """The proxy counts every request of a key, not only those REST saw first."""
    assert [_proxy(world["a"].key).status_code for _ in range(RATE)] == [200] * RATE
    r = _proxy(world["a"].key)
    assert r.status_code == 429 and r.json()["error"]["code"] == "throttled" and r["Retry-After"]
    assert len(upstream) == RATE
