"""MCP memory_weave had no event_id, so a model's retried tool call stored the memory twice; and
memory_resonate clamped k=100000 to 20 without a word where REST answers 400."""

from __future__ import annotations

import pytest
from mcp.server.mcpserver.exceptions import ToolError

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
