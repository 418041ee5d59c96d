"""MCP tools through the official SDK client, against the stdio server (a real subprocess)."""

from __future__ import annotations

import json
import os
import sys

import anyio
import pytest
from django.db import connection
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from assets.models import AuditEvent
from memory.models import Node
from nylon_project import embedded

from .helpers import approve, create_asset

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _params(key: str) -> StdioServerParameters:
    env = dict(os.environ)
    env["DATABASE_URL"] = embedded.url_with_database(os.environ["DATABASE_URL"], connection.settings_dict["NAME"])
    return StdioServerParameters(command=sys.executable, args=["manage.py", "mcp_stdio", "--key", key],
                                 env=env, cwd=ROOT)


def _data(result) -> dict:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content.get("result", result.structured_content)
    return json.loads(result.content[0].text)


async def _session(key: str, script):
    async with stdio_client(_params(key)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await script(session)


def test_tools_over_stdio(world, client_for):
    a = world["a"]
    admin = client_for(a.admin)
    persona = create_asset(admin, kind="persona", visibility="org", title="Tone", body="Be terse.")
    admin.post(f"/api/v1/assets/{persona['id']}/transition", {"to": "candidate"}, format="json")
    approve(admin, persona["id"])
    admin.post(f"/api/v1/agents/{a.agent.id}/bindings", {"asset_id": persona["id"]}, format="json")
    private_asset = create_asset(client_for(a.member), title="Member only")

    async def script(s):
        names = {t.name for t in (await s.list_tools()).tools}
        assert names >= {"memory_weave", "memory_resonate", "memory_context", "memory_get"}
        w = _data(await s.call_tool("memory_weave", {"text": "The Alfama venue is booked for March 14.",
                                                     "visibility": "org"}))
        nid = w["node_ids"][0]
        hits = _data(await s.call_tool("memory_resonate", {"query": "When is the Alfama venue booked?"}))["hits"]
        ctx = _data(await s.call_tool("memory_context", {"query": "Alfama venue", "language": "fr"}))
        node = _data(await s.call_tool("memory_get", {"type": "node", "id": nid}))
        asset = _data(await s.call_tool("memory_get", {"type": "asset", "id": persona["id"]}))
        denied = await s.call_tool("memory_get", {"type": "asset", "id": private_asset["id"]})
        # an argument the tool does not take is an error (it was dropped: a success, the memory dated now)
        unknown = await s.call_tool("memory_weave", {"text": "Tagged note.", "tags": ["x"]})
        dated = _data(await s.call_tool("memory_weave", {"text": "Backfilled: the Q3 review happened.",
                                                         "occurred_at": "2026-11-03T09:00:00Z"}))
        schema = next(t for t in (await s.list_tools()).tools if t.name == "memory_weave").input_schema
        return nid, hits, ctx, node, asset, denied, (unknown, dated, schema)

    nid, hits, ctx, node, asset, denied, (unknown, dated, schema) = anyio.run(_session, a.key, script)
    assert unknown.is_error and "tags" in unknown.content[0].text
    assert not Node.objects.filter(text="Tagged note.").exists()
    assert Node.objects.get(id=dated["node_ids"][0]).occurred_at.isoformat().startswith("2026-11-03T09:00")
    assert schema.get("additionalProperties") is False and {"occurred_at", "team_id"} <= set(schema["properties"])
    assert hits[0]["node_id"] == nid
    assert "Be terse." in ctx["context"] and "au plus 3 fois" in ctx["context"] and f"[memory {nid}]" in ctx["context"]
    # the text and its flags: not the text again in halves, the items as JSON, the budget
    assert set(ctx) == {"context", "stable_hash", "no_match", "degraded", "degraded_reasons", "truncated",
                        "dropped", "memory_call_budget", "language"}
    assert node["id"] == nid and asset["title"] == "Tone"
    assert denied.is_error and "Not found" in denied.content[0].text
    assert AuditEvent.objects.filter(org=a.org, action="asset.read", outcome="denied", request_id="mcp",
                                     actor_kind="agent").count() == 1
    # The other org's agent sees none of it through the same tools.
    other = anyio.run(_session, world["b"].key,
                      lambda s: s.call_tool("memory_get", {"type": "node", "id": nid}))
    assert other.is_error


def test_bad_key_refuses_to_start(world):
    import subprocess

    p = _params("nyl_bad_key")
    r = subprocess.run([p.command, *p.args], env=p.env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "agent key" in r.stderr


def test_tools_over_streamable_http_in_the_asgi_app(world, client_for):
    """uvicorn serves nylon_project.asgi: /mcp is MCP (agent key header), the rest is still Django."""
    import subprocess
    import time

    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    a = world["a"]
    from nylon_project.live import free_port

    port = free_port()
    env = _params(a.key).env
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "nylon_project.asgi:application", "--port", str(port),
                             "--lifespan", "on"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if httpx2.get(f"{base}/healthz", timeout=2).status_code in (200, 503):
                    break
            except Exception:  # noqa: BLE001 - still starting
                time.sleep(0.3)
        r = httpx2.get(f"{base}/api/v1/org", headers={"Authorization": f"Bearer {a.key}"}, timeout=10)
        assert r.status_code == 200 and r.json()["slug"] == "alpha"  # Django still answers

        async def run(key):
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
                async with streamable_http_client(f"{base}/mcp", http_client=http) as (read, write, *_):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        w = await session.call_tool("memory_weave", {"text": "HTTP note about the Orion deal."})
                        got = await session.call_tool("memory_get", {"type": "node", "id": _data(w)["node_ids"][0]})
                        return _data(w), _data(got)

        w, got = anyio.run(run, a.key)
        assert got["id"] == w["node_ids"][0] and got["owner"] == {"kind": "agent", "id": a.agent.id}

        # a bad key: 401 before any MCP handling (tests/assets/test_mcp_http_auth.py)
        r = httpx2.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                        headers={"Authorization": "Bearer nyl_x_y", "Accept": "application/json, text/event-stream"},
                        timeout=30)
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _error(result) -> str:
    assert result.is_error, result.content
    return result.content[0].text


def test_unstorable_input_is_refused_as_rest_refuses_it(world, client_for):
    """A NUL byte reached Postgres (DataError) and the client read only "Error executing tool
    memory_weave", where REST answers 400 naming the field. The MCP tools apply REST's rules."""
    from memory.models import Node

    a = world["a"]
    rest = client_for(a.key)
    for body in ({"text": "Budget\x00 approved."}, {"text": "Budget approved.", "session_key": "s\x001"},
                 {"text": "Budget approved.", "speaker": "x" * 201}, {"text": "Budget approved.",
                                                                      "visibility": "public"}):
        assert rest.post("/api/v1/memories/weave", body, format="json").status_code == 400, body

    async def script(s):
        return {
            "nul_text": await s.call_tool("memory_weave", {"text": "Budget\x00 approved."}),
            "nul_session": await s.call_tool("memory_weave", {"text": "Budget approved.", "session_key": "s\x001"}),
            "nul_speaker": await s.call_tool("memory_weave", {"text": "Budget approved.", "speaker": "a\x00b"}),
            "long_speaker": await s.call_tool("memory_weave", {"text": "Budget approved.", "speaker": "x" * 201}),
            "long_session": await s.call_tool("memory_weave", {"text": "Budget approved.", "session_key": "k" * 201}),
            "blank": await s.call_tool("memory_weave", {"text": "   "}),
            "visibility": await s.call_tool("memory_weave", {"text": "Budget approved.", "visibility": "public"}),
            "nul_query": await s.call_tool("memory_resonate", {"query": "budget\x00"}),
            "nul_context": await s.call_tool("memory_context", {"query": "budget\x00"}),
            "nul_type": await s.call_tool("memory_get", {"type": "node\x00", "id": 1}),
            "huge_id": await s.call_tool("memory_get", {"type": "node", "id": 2**63}),
            "ok": await s.call_tool("memory_weave", {"text": "Budget approved.", "session_key": "s1",
                                                     "speaker": "Ana"}),
        }

    out = anyio.run(_session, a.key, script)
    ok = _data(out.pop("ok"))
    errors = {name: _error(r) for name, r in out.items()}
    for name, field in [("nul_text", "text"), ("nul_session", "session_key"), ("nul_speaker", "speaker"),
                        ("nul_query", "query"), ("nul_context", "query"), ("nul_type", "type")]:
        assert f"{field}: NUL characters" in errors[name], (name, errors[name])
    assert "speaker" in errors["long_speaker"] and "200 characters" in errors["long_speaker"]
    assert "session_key" in errors["long_session"] and "200 characters" in errors["long_session"]
    assert "text: Empty text." in errors["blank"]
    assert "visibility" in errors["visibility"] and "public" in errors["visibility"]
    assert "Not found" in errors["huge_id"]
    for name, text in errors.items():
        assert text.rstrip(". ") != f"Error executing tool {name}", (name, text)
        assert "DataError" not in text and "Traceback" not in text and "psycopg" not in text, (name, text)
    # Nothing refused was written; the valid call after them was, as given (not truncated).
    node = Node.objects.get(owner_agent=a.agent)
    assert ok["node_ids"] == [node.id] and node.session_key == "s1" and node.speaker == "Ana"


def test_a_crash_in_a_tool_reaches_the_client_as_a_tool_error_without_internals(world, monkeypatch):
    """In process: every registered tool runs in the wrapper that maps failures (and hands the
    thread's connection back); an unexpected exception is logged, its text never sent."""
    from mcp.server.mcpserver.exceptions import ToolError

    from assets import mcp as nylon_mcp

    monkeypatch.setattr(nylon_mcp._Auth, "stdio_key", world["a"].key)

    def boom(*args, **kwargs):
        raise RuntimeError("relation memory_node: secret internals")

    monkeypatch.setattr(nylon_mcp, "tool_get", boom)
    server = nylon_mcp.build_server()
    with pytest.raises(ToolError) as crash:
        anyio.run(server.call_tool, "memory_get", {"type": "node", "id": 1})
    assert "Internal error" in str(crash.value) and "secret" not in str(crash.value)
    # An unpaired surrogate (REST's JSON parser refuses it too) never reaches Postgres.
    with pytest.raises(ToolError) as bad:
        anyio.run(server.call_tool, "memory_weave", {"text": "half a pair \ud800"})
    assert "text: NUL characters and unpaired surrogates are not allowed." in str(bad.value)


def test_tools_are_rate_limited_per_key_with_rest_and_fail_open_without_the_cache(world, client_for, monkeypatch):
    """In process: a key's MCP calls count in REST's per-key budget (ActorRateThrottle); over it a
    tool answers a ToolError naming the retry delay. With Redis down the limit fails open, as REST's."""
    from django.core.cache import cache
    from django.test import override_settings
    from mcp.server.mcpserver.exceptions import ToolError

    from assets import mcp as nylon_mcp
    from nylon_project.live import free_port
    from teams.auth import ActorRateThrottle, authenticate_key

    # patched in place: DRF binds this dict to the throttle class at import, out of override_settings' reach
    monkeypatch.setitem(ActorRateThrottle.THROTTLE_RATES, "actor", "2/min")
    key_id = authenticate_key(world["a"].key).key_id
    cache_key = ActorRateThrottle.cache_format % {"scope": "actor", "ident": f"key{key_id}"}
    cache.delete(cache_key)  # key ids restart with each test database; Redis may remember an old run
    monkeypatch.setattr(nylon_mcp._Auth, "stdio_key", world["a"].key)
    server = nylon_mcp.build_server()

    def call():
        return anyio.run(server.call_tool, "memory_weave", {"text": "The Orion deal closes in May."})

    try:
        call()
        call()
        with pytest.raises(ToolError) as limited:
            call()
        assert "Rate limited" in str(limited.value) and "retry in" in str(limited.value), str(limited.value)
        r = client_for(world["a"].key).get("/api/v1/org")
        assert r.status_code == 429 and 1 <= int(r["Retry-After"]) <= 60  # one budget with REST

        dead = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                            "LOCATION": f"redis://127.0.0.1:{free_port()}/0"}}
        with override_settings(CACHES=dead):
            call()  # no cache to count in: served, not refused
    finally:
        cache.delete(cache_key)
