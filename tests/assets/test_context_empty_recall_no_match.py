"""An empty recall for a query with terms is a no-match (first-user audit: an org with no memory
answered ``no_match: false`` from /context and MCP memory_resonate, as if the empty recall matched)."""

from __future__ import annotations

import pytest

from assets.mcp import tool_resonate
from teams.auth import actor_for_agent
from teams.models import Scope

from .helpers import weave
from .test_context_relevance import _context

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]


def test_an_org_with_no_memory_is_no_match(world, client_for):
    body = _context(client_for(world["a"].key), "Who is on call this week?")
    assert body["recall"] == [] and body["no_match"] is True


def test_memory_the_agent_cannot_read_is_no_match(world, client_for):
    weave(client_for(world["b"].key), "Priya is on call this week.", visibility="org")  # another org's
    body = _context(client_for(world["a"].key), "Who is on call this week?")
    assert body["recall"] == [] and body["no_match"] is True


def test_a_query_of_stop_words_only_is_not_judged(world, client_for):
    body = _context(client_for(world["a"].key), "is it the")
    assert body["recall"] == [] and body["no_match"] is False


def test_a_matching_memory_is_still_a_match(world, client_for):
    c = client_for(world["a"].key)
    weave(c, "Priya is on call this week.")
    body = _context(c, "Who is on call this week?")
    assert body["recall"] and body["no_match"] is False


def test_mcp_resonate_in_an_empty_org_is_no_match(world):
    actor = actor_for_agent(world["a"].agent, scopes=frozenset({Scope.READ, Scope.WRITE}))
    out = tool_resonate(actor, query="Who is on call this week?")
    assert out["hits"] == [] and out["no_match"] is True
