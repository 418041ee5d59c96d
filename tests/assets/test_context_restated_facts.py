"""A fact that only restates a turn recalled beside it is one hit: in MCP memory_resonate and the
console's resonate playground each turn and its near-identical heuristic fact were both listed, so
about half of the top k were duplicates. The turn is kept (its line has the date and speaker), at the
better place of the two, and names the fact it stands for (``folded``)."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from assets.context import _restated
from assets.mcp import tool_resonate
from memory.models import MemorySession, Node, NodeKind, SourceKind
from memory.selectors import resonate_for
from reflection.services import abstract_session
from teams.auth import actor_for_agent

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]

TURNS = [("ana", "We decided to move the feature flags to LaunchDarkly."),
         ("ben", "I will migrate the checkout feature flags by Friday."),
         ("chloe", "We switched the feature flag audit log to daily exports."),
         ("dev", "We agreed that stale feature flags are deleted after two sprints."),
         ("ana", "Lunch is at noon today."),
         ("ben", "The staging cluster has three nodes.")]
QUERY = "What happened with the feature flags?"


def _session_with_facts(world, client_for) -> tuple[dict[int, int], set[int]]:
    """The turns woven as the agent, abstracted without an LLM: {fact id: its turn id}, turn ids."""
    a = world["a"]
    r = client_for(a.key).post("/api/v1/memories/weave-session", {"session_key": "flags", "visibility": "org", "turns": [
        {"speaker": who, "text": text} for who, text in TURNS]}, format="json")
    assert r.status_code in (200, 201), r.content
    turns = set(r.json()["node_ids"])
    abstract_session(session_id=MemorySession.objects.get(org=a.org, key="flags").id)
    facts = {f: src[0] for f, src in Node.objects.filter(org=a.org, kind=NodeKind.FACT,
                                                         source_kind=SourceKind.HEURISTIC)
             .values_list("id", "source_node_ids")}
    assert len(facts) >= 3 and set(facts.values()) <= turns  # the premise: heuristic facts of the turns
    return facts, turns


def _expected_order(raw: list[int], facts: dict[int, int], k: int) -> list[int]:
    """The raw hits with each fact whose turn is also among them replaced by that turn, at the better
    of their places."""
    out: list[int] = []
    for nid in raw:
        shown = facts[nid] if nid in facts and facts[nid] in raw else nid
        if shown not in out:
            out.append(shown)
    return out[:k]


def test_mcp_resonate_shows_a_turn_once_for_its_restating_fact(world, client_for):
    facts, turns = _session_with_facts(world, client_for)
    actor = actor_for_agent(world["a"].agent, scopes=frozenset({"read"}))
    raw = [h.node_id for h in resonate_for(actor=actor, query=QUERY, k=12).result.hits]
    # the premise: the engine lists turns beside their facts
    assert sum(1 for f, t in facts.items() if f in raw[:6] and t in raw[:6]) >= 2, raw
    hits = tool_resonate(actor, query=QUERY, k=6)["hits"]
    ids = [h["node_id"] for h in hits]
    assert not {f for f, t in facts.items() if t in ids} & set(ids), hits
    assert ids == _expected_order(raw, facts, 6)
    for h in hits:
        assert h["folded"] == sorted(f for f, t in facts.items() if t == h["node_id"] and f in raw)
    shown_turn = next(h for h in hits if h["folded"])
    assert shown_turn["speaker"] and shown_turn["occurred_at"]  # the turn's line: date and speaker


def test_the_resonate_playground_shows_a_turn_once_for_its_restating_fact(world, client_for):
    facts, turns = _session_with_facts(world, client_for)
    c = Client()
    c.force_login(world["a"].member)
    r = c.post("/console/resonate/", {"query": QUERY, "k": 6}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    html = r.content.decode()
    listed = [int(m) for m in re.findall(r'<li class="hit">\s*<div><span class="score">[^<]*</span>\s*'
                                         r'<span class="pill[^"]*">[^<]*</span>\s*<a href="/console/memories/(\d+)/',
                                         html)]
    assert listed and len(listed) == len(set(listed))
    assert not {f for f, t in facts.items() if t in listed} & set(listed), listed
    assert "also recalled, shown as this one" in html


def test_an_llm_fact_is_folded_only_when_it_restates_its_one_turn():
    assert _restated("Ana will ship the invoice export on Friday.", "I will ship the invoice export on Friday.",
                     "Ana")
    assert not _restated("The team moved the flags to LaunchDarkly and Ben migrates the checkout ones by Friday.",
                         "We decided to move the feature flags to LaunchDarkly.", "ana")
    assert not _restated("", "Sounds good.", "ana")
