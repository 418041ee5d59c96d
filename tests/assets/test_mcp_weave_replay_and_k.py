"""MCP memory_weave had no event_id, so a model's retried tool call stored the memory twice; and
memory_resonate clamped k=100000 to 20 without a word where REST answers 400."""

from __future__ import annotations

import pytest
from mcp.server.mcpserver.exceptions import ToolError
from rest_framework.exceptions import ValidationError

from assets.mcp import MCP_MAX_K, tool_resonate, tool_weave
from memory.models import Node
from teams.auth import actor_for_agent

pytestmark = pytest.mark.django_db


def _actor(world):
    return actor_for_agent(world["a"].agent, scopes=frozenset({"read", "write"}))


def test_a_retried_weave_with_its_event_id_stores_one_memory(world):
    actor = _actor(world)
    first = tool_weave(actor, text="The Alfama venue is booked for March 14.", event_id="call-7")
    again = tool_weave(actor, text="The Alfama venue is booked for March 14.", event_id="call-7")
    assert first["created"] == 1 and again["created"] == 0 and again["node_ids"] == first["node_ids"]
    assert Node.objects.filter(org=world["a"].org, text="The Alfama venue is booked for March 14.").count() == 1
    with pytest.raises(ToolError, match="event_id 'call-7' is already stored") as e:
        tool_weave(actor, text="The Alfama venue is booked for March 21.", event_id="call-7")
    assert "nothing was written" in str(e.value)
    assert not Node.objects.filter(org=world["a"].org, text__contains="March 21").exists()
    # without one, each call is a new memory, as before
    assert tool_weave(actor, text="Standup moved to 9:30.")["created"] == 1
    assert tool_weave(actor, text="Standup moved to 9:30.")["created"] == 1


@pytest.mark.parametrize("k", [0, -1, MCP_MAX_K + 1, 100000])
def test_a_k_out_of_range_is_refused_as_in_rest(world, k):
    with pytest.raises(ToolError, match=f"k: between 1 and {MCP_MAX_K}"):
        tool_resonate(_actor(world), query="Alfama venue", k=k)


def test_k_in_range_is_served(world):
    actor = _actor(world)
    tool_weave(actor, text="The Alfama venue is booked for March 14.")
    assert len(tool_resonate(actor, query="Alfama venue", k=MCP_MAX_K)["hits"]) == 1


def test_a_query_longer_than_rests_limit_is_refused_not_cut(world):
    """It was cut to 4,000 characters without a word (a 1.4 MB query was read whole first)."""
    from assets.mcp import MAX_QUERY_CHARS, tool_context

    actor = _actor(world)
    long = "deploy window " * (MAX_QUERY_CHARS // 14 + 1)
    for call in (lambda: tool_resonate(actor, query=long), lambda: tool_context(actor, query=long)):
        with pytest.raises(ToolError, match=f"query: at most {MAX_QUERY_CHARS} characters"):
            call()
    assert tool_resonate(actor, query=long[:MAX_QUERY_CHARS])["hits"] == []


def test_weave_takes_a_team_and_a_time(world):
    from teams.models import Team

    actor = _actor(world)
    a = world["a"]
    out = tool_weave(actor, text="The core team owns the billing runbook.", visibility="team", team_id=a.team.id,
                     occurred_at="2026-11-20T10:00:00Z")
    node = Node.objects.get(id=out["node_ids"][0])
    assert node.team_id == a.team.id and node.occurred_at.isoformat().startswith("2026-11-20T10:00")
    other = Team.objects.create(org=a.org, name="web", slug="web")
    # (a service refusal: the tool wrapper, _tool_call, makes it the tool's error message)
    with pytest.raises(ValidationError, match="own team"):
        tool_weave(actor, text="x", visibility="team", team_id=other.id)
    with pytest.raises(ToolError, match="occurred_at"):
        tool_weave(actor, text="x", occurred_at="yesterday-ish")
