"""Load shedding (nylon_project.shedding): past NYLON_WEB_MAX_INFLIGHT requests in flight a web
process answers 503 + Retry-After at once, in the API's error shape; /healthz is never shed."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from nylon_project.live import start_live_server
from nylon_project.shedding import LoadShedder


def _run(coro):
    return asyncio.run(coro)


async def _call(app, path: str) -> tuple[int, dict, bytes]:
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    await app({"type": "http", "path": path, "method": "GET", "headers": []}, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), body


def test_requests_past_the_limit_are_refused_and_the_slot_is_given_back():
    release = asyncio.Event()
    entered = []

    async def slow_app(scope, receive, send):  # stands in for Django: holds its slot until released
        entered.append(scope["path"])
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def scenario():
        shedder = LoadShedder(slow_app, limit=2)
        held = [asyncio.create_task(_call(shedder, f"/api/v1/x{i}")) for i in range(2)]
        while len(entered) < 2:
            await asyncio.sleep(0)
        status, headers, body = await _call(shedder, "/api/v1/third")
        assert status == 503 and headers[b"retry-after"] == b"1"
        assert b'"code": "overloaded"' in body and shedder.shed == 1
        assert json.loads(body)["request_id"] == headers[b"x-request-id"].decode()  # like every error
        health = asyncio.create_task(_call(shedder, "/healthz"))  # exempt: reaches the app
        proxy = asyncio.create_task(_call(shedder, "/proxy/openai/v1/chat/completions"))  # exempt
        while len(entered) < 4:
            await asyncio.sleep(0)
        release.set()
        results = await asyncio.gather(*held, health, proxy)
        assert [r[0] for r in results] == [200, 200, 200, 200]
        assert shedder.inflight == 0
        assert (await _call(shedder, "/api/v1/after"))[0] == 200  # slots were given back

    _run(scenario())


def test_zero_limit_turns_shedding_off():
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    assert _run(_call(LoadShedder(app, limit=0), "/api/v1/x"))[0] == 204


@pytest.mark.django_db(transaction=True)
def test_live_server_sheds_a_burst_and_keeps_healthz(world):
    """A real uvicorn with a limit of one request in flight and a burst of 24 concurrent resonates:
    some are served, the rest refused with the error body and Retry-After; nothing else, and the
    health checks sent in the same burst are all answered by the health view."""
    server = start_live_server(NYLON_WEB_MAX_INFLIGHT="1")
    headers = {"Authorization": f"Bearer {world['a'].key}"}
    try:
        with httpx.Client(base_url=server.url, headers=headers, timeout=60) as c:
            assert c.post("/api/v1/memories/weave", json={"text": "The deploy window is Tuesday."}).status_code == 201

        async def burst():
            async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60,
                                         limits=httpx.Limits(max_connections=32)) as c:
                calls = [c.post("/api/v1/memories/resonate", json={"query": "When is the deploy window?"})
                         for _ in range(24)]
                return await asyncio.gather(*calls, *[c.get("/healthz") for _ in range(4)])

        *responses, h1, h2, h3, h4 = _run(burst())
        for h in (h1, h2, h3, h4):  # health is never shed: each answer comes from the health view
            assert "overloaded" not in h.text and "checks" in h.json(), h.text
        codes = [r.status_code for r in responses]
        assert set(codes) <= {200, 503} and 200 in codes and 503 in codes, codes
        refused = next(r for r in responses if r.status_code == 503)
        assert refused.headers["retry-after"] == "1" and refused.json()["error"]["code"] == "overloaded"
        assert refused.json()["request_id"] == refused.headers["x-request-id"]
    finally:
        server.stop()
