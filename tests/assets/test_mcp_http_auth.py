"""MCP over HTTP answers 401 to a missing or bad agent key, before any MCP handling. It used to
answer initialize and tools/list 200 to anyone and tools/call 200 with an error result, so an MCP
client could not tell that its key was wrong."""

from __future__ import annotations

import subprocess
import sys

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from nylon_project.live import free_port, listening

from .test_mcp import ROOT, _params

pytestmark = pytest.mark.django_db(transaction=True)

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
CALL = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "memory_resonate", "arguments": {"query": "anything"}}}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def mcp_base(world):
    """uvicorn serving nylon_project.asgi with its lifespan on (which /mcp needs)."""
    import time

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "nylon_project.asgi:application", "--port", str(port),
                             "--lifespan", "on", "--no-access-log"], cwd=ROOT, env=_params(world["a"].key).env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and not listening(port):
        assert proc.poll() is None, "uvicorn exited"
        time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.mark.parametrize(("headers", "code"), [
    ({}, "not_authenticated"),
    ({"Authorization": "Bearer nyl_bad_key"}, "authentication_failed"),
    ({"X-Api-Key": "not-a-key"}, "authentication_failed"),
])
def test_no_or_bad_key_is_401_for_every_mcp_request(mcp_base, headers, code):
    for message in (INIT, LIST, CALL):
        r = httpx2.post(f"{mcp_base}/mcp", json=message, headers={**ACCEPT, **headers}, timeout=30)
        assert r.status_code == 401, (message["method"], r.status_code, r.text)
        assert r.headers["www-authenticate"].startswith("Bearer")
        body = r.json()
        assert body["error"]["code"] == code and body["error"]["message"]
        assert body["request_id"] == r.headers["x-request-id"]


def test_a_valid_key_still_gets_mcp_answers(mcp_base, world):
    r = httpx2.post(f"{mcp_base}/mcp", json=INIT, headers={**ACCEPT, "Authorization": f"Bearer {world['a'].key}"},
                    timeout=30)
    assert r.status_code == 200 and r.json()["result"]["serverInfo"]["name"] == "nylon"


def test_the_mcp_client_fails_to_initialize_with_a_bad_key(mcp_base):
    initialized = []

    async def connect():
        async with httpx2.AsyncClient(headers={"Authorization": "Bearer nyl_bad_key"}, timeout=30) as http:
            async with streamable_http_client(f"{mcp_base}/mcp", http_client=http) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    initialized.append(True)

    with pytest.raises(Exception):  # noqa: B017, PT011 - the SDK's own error, wrapped in task groups
        anyio.run(connect)
    assert initialized == []
