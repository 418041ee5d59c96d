"""memory_get takes the type the context names: recall lines read ``[memory N]`` and the injected
guide says type "memory", so the tool must accept it (it answered "type is 'node' or 'asset'").
In process, as test_mcp's crash and rate-limit tests: the registered tools with the stdio key."""

from __future__ import annotations

import re

import anyio
import pytest
from mcp.server.mcpserver.exceptions import ToolError

from assets.context import GUIDES, guide
from memory.cache import get_cache

from .helpers import approve, create_asset, weave

pytestmark = pytest.mark.django_db(transaction=True)  # the tools run in worker threads


@pytest.fixture(autouse=True)
def fresh_cache():
    get_cache().drop()
    yield
    get_cache().drop()


@pytest.fixture
def server(world, monkeypatch):
    from assets import mcp as nylon_mcp

    monkeypatch.setattr(nylon_mcp._Auth, "stdio_key", world["a"].key)
    return nylon_mcp.build_server()


def _call(server, name: str, args: dict) -> dict:
    result = anyio.run(server.call_tool, name, args)
    assert not result.is_error, result.content
    return result.structured_content.get("result", result.structured_content)


def test_memory_get_reads_the_memory_a_recall_line_names(world, client_for, server):
    nid = weave(client_for(world["a"].key), "The billing migration is owned by Priya.", visibility="org")
    ctx = _call(server, "memory_context", {"query": "Who owns the billing migration?"})
    assert re.search(rf"\[memory {nid}\]", ctx["context"])  # the line the model reads
    got = _call(server, "memory_get", {"type": "memory", "id": nid})
    assert got["id"] == nid and "Priya" in got["text"]
    assert _call(server, "memory_get", {"type": "node", "id": nid})["id"] == nid  # the REST name still works
    with pytest.raises(ToolError) as bad:
        anyio.run(server.call_tool, "memory_get", {"type": "fact", "id": nid})
    assert "'memory'" in str(bad.value) and "'asset'" in str(bad.value)


@pytest.mark.parametrize("language", sorted(GUIDES))
def test_the_guide_names_exactly_the_types_memory_get_takes(world, client_for, server, language):
    """Every type the guide tells the model to pass is one the tool accepts, in every language."""
    a = world["a"]
    admin = client_for(a.admin)
    scen = create_asset(admin, kind="scenario", visibility="org", title="Offsite", summary="Plan it")
    admin.post(f"/api/v1/assets/{scen['id']}/transition", {"to": "candidate"}, format="json")
    approve(admin, scen["id"])
    r = admin.post(f"/api/v1/agents/{a.agent.id}/bindings", {"asset_id": scen["id"], "mode": "index"}, format="json")
    assert r.status_code == 201, r.content
    assert f"[asset {scen['id']}]" in _call(server, "memory_context", {})["context"]
    nid = weave(client_for(a.key), "The Alfama venue is booked for March 14.", visibility="org")
    line = next(x for x in guide(language, can_write=True).split("\n") if x.startswith("- memory_get("))
    named = re.findall(r'"(\w+)"', line)
    assert set(named) == {"memory", "node", "asset"}, line
    ids = {"memory": nid, "node": nid, "asset": scen["id"]}
    for t in named:
        assert _call(server, "memory_get", {"type": t, "id": ids[t]})["id"] == ids[t]
