"""MCP over streamable HTTP must give every tool call's database connection back to the web
process's pool. The SDK runs sync tools in anyio worker threads; a connection a thread kept after
its call stayed checked out of the psycopg pool for good, and once the pool was empty every REST
request waited NYLON_DB_POOL_TIMEOUT and answered 503 — for the life of the process."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from nylon_project import embedded
from nylon_project.live import free_port, listening, live_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
POOL_MAX = 3
POOL_TIMEOUT = 4.0
CONCURRENT = 8  # more tool calls at once than the pool holds connections
ROUNDS = 3


def _start(env: dict) -> tuple[subprocess.Popen, str, Path]:
    """uvicorn on nylon_project.asgi with the lifespan on: the MCP session manager runs in it
    (nylon_project.live starts its servers with the lifespan off, which /mcp cannot serve)."""
    port = free_port()
    log_path = embedded.nylon_home() / f"uvicorn-mcp-pool-{port}.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "nylon_project.asgi:application", "--host",
                                 "127.0.0.1", "--port", str(port), "--no-access-log", "--lifespan", "on"],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline and not listening(port):
        if proc.poll() is not None:
            raise RuntimeError(f"uvicorn exited:\n{log_path.read_text()[-3000:]}")
        time.sleep(0.1)
    return proc, f"http://127.0.0.1:{port}", log_path


async def _call(base: str, key: str, tool: str, args: dict):
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        async with streamable_http_client(f"{base}/mcp", http_client=http) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await session.call_tool(tool, args)


def _text(result) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def test_tool_calls_return_their_connections_to_the_pool(world, client_for):
    a = world["a"]
    nid = client_for(a.key).post("/api/v1/memories/weave", {"text": "The Lisbon offsite is on May 3."},
                                 format="json").json()["node_ids"][0]
    env = live_env(NYLON_DB_POOL_MAX=str(POOL_MAX), NYLON_DB_POOL_MIN="1", NYLON_DB_POOL_TIMEOUT=str(POOL_TIMEOUT),
                   NYLON_CACHE_PREFIX=f"test-mcp-pool-{uuid.uuid4().hex[:8]}", NYLON_ENQUEUE_TASKS="0",
                   NYLON_RATE_LIMIT="1000000/min")
    proc, base, log_path = _start(env)
    # Successful calls and refused ones (not found, bad argument), of every tool: each must give
    # its connection back, whichever way it ends.
    calls = [
        ("memory_get", {"type": "node", "id": nid}, True),
        ("memory_get", {"type": "node", "id": 999_999_999}, False),
        ("memory_resonate", {"query": "When is the Lisbon offsite?"}, True),
        ("memory_context", {"query": "Lisbon offsite"}, True),
        ("memory_weave", {"text": "", "visibility": "private"}, False),
        ("memory_get", {"type": "nothing", "id": nid}, False),
        ("memory_weave", {"text": "Pool check note."}, True),
        ("memory_get", {"type": "node", "id": nid}, True),
    ]
    assert len(calls) == CONCURRENT
    try:
        with httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {a.key}"}, timeout=30) as http:
            assert http.get("/api/v1/ping").status_code == 200
            # Warm up one at a time (embedder, engine cache), so no call of a round waits on a load.
            for tool, args, _ in calls[:4]:
                anyio.run(_call, base, a.key, tool, args)

            async def round_() -> list:
                results: list = [None] * len(calls)

                async def one(i: int, tool: str, args: dict) -> None:
                    results[i] = await _call(base, a.key, tool, args)

                async with anyio.create_task_group() as tg:
                    for i, (tool, args, _) in enumerate(calls):
                        tg.start_soon(one, i, tool, args)
                return results

            for n in range(ROUNDS):
                results = anyio.run(round_)
                for (tool, args, ok), r in zip(calls, results, strict=True):
                    assert r.is_error is not ok, (n, tool, args, _text(r))
                    # A refusal names what was wrong; none is the SDK's bare "Error executing tool".
                    assert ok or _text(r).rstrip() != f"Error executing tool {tool}", (n, tool, _text(r))
                started = time.monotonic()
                r = http.get("/api/v1/ping")
                elapsed = time.monotonic() - started
                assert r.status_code == 200, (n, r.status_code, r.text, log_path.read_text()[-2000:])
                # A leaked pool makes the request wait the whole pool timeout first.
                assert elapsed < POOL_TIMEOUT / 2, (n, elapsed)
            # Still healthy once the SDK's idle worker threads have gone (anyio drops them after 10 s):
            # a connection a thread died holding would never come back.
            time.sleep(11)
            for _ in range(POOL_MAX + 1):
                r = http.get("/api/v1/ping")
                assert r.status_code == 200, (r.status_code, r.text)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
