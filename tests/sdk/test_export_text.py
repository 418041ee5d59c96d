"""``export()`` is JSONL text whatever the export holds: the server sends ``application/x-ndjson``,
and an export that is only its header line is one valid JSON value, which used to come back as a
dict (and crash ``nylon export``). In process: the server is an httpx MockTransport."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from nylon_sdk import AsyncClient, Client
from nylon_sdk._core import decode

HEADER = json.dumps({"type": "header", "format": "nylon-memory", "version": 1, "org": "alpha",
                     "exported_at": "2024-01-01T00:00:00+00:00"}) + "\n"
ROWS = HEADER + "".join(json.dumps(r) + "\n" for r in [
    {"type": "node", "id": 1, "text": "Priya is on call."},
    {"type": "edge", "src": 1, "dst": 1, "kind": "related", "weight": 0.5}])


def export_server(body: str, seen: list[httpx.Request] | None = None) -> httpx.MockTransport:
    """GET /export answers ``body`` as the real view does; POST /import records the request."""

    def handle(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        if request.url.path == "/api/v1/export":
            return httpx.Response(200, content=body.encode(), headers={"Content-Type": "application/x-ndjson"})
        if request.url.path == "/api/v1/import":
            return httpx.Response(201, json={"node": 0, "edge": 0, "asset": 0, "asset_version": 0, "skipped": 0})
        return httpx.Response(404, json={"error": {"code": "not_found", "message": "nope"}})

    return handle


@pytest.mark.parametrize("body", [HEADER, ROWS], ids=["header-only", "rows"])
def test_export_is_text(body):
    with Client("http://nylon.test", "k", transport=httpx.MockTransport(export_server(body))) as client:
        text = client.export()
    assert isinstance(text, str) and text == body


@pytest.mark.parametrize("body", [HEADER, ROWS], ids=["header-only", "rows"])
def test_async_export_is_text(body):
    async def go() -> str:
        async with AsyncClient("http://nylon.test", "k",
                               transport=httpx.MockTransport(export_server(body))) as client:
            return await client.export()

    text = asyncio.run(go())
    assert isinstance(text, str) and text == body


def test_empty_export_body_is_empty_text():
    with Client("http://nylon.test", "k", transport=httpx.MockTransport(export_server(""))) as client:
        assert client.export() == ""


def test_header_only_export_round_trips_through_import():
    seen: list[httpx.Request] = []
    with Client("http://nylon.test", "k", transport=httpx.MockTransport(export_server(HEADER, seen))) as client:
        client.import_(client.export())
    sent = json.loads(seen[-1].content)["jsonl"]
    # the header line itself, not the header dict's keys as lines
    assert [json.loads(line) for line in sent.splitlines()] == [json.loads(HEADER)]


@pytest.mark.parametrize(("content_type", "is_json"), [
    ("application/json", True),
    ("application/json; charset=utf-8", True),
    ("application/problem+json", True),
    ("application/x-ndjson", False),
    ("application/jsonl", False),
    ("text/plain", False),
])
def test_decode_parses_only_json_documents(content_type, is_json):
    body = b'{"type": "header"}'
    decoded = decode(httpx.Response(200, content=body, headers={"Content-Type": content_type}))
    assert decoded == ({"type": "header"} if is_json else body.decode())
