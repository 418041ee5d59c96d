"""A contradiction among many statements that embed alike: the audit wove twelve "The retention
period for dataset D<i> is 30 days." and then the twelve "... is 90 days."; with only the 4 nearest
by vector compared, D1-D4 were flagged and D5-D12 missed (the older statement of the same dataset
was not among the 4 nearest: all twelve lines are about equally near). Candidates now also include
the nodes naming the new node's entities (ranked by how much of them they share), so the statement
about the same thing is found; a line that shares only common words with them gains nothing."""

from __future__ import annotations

import pytest

from memory.models import Node
from reflection import conflicts
from reflection.models import Conflict
from teams import services as team_services
from teams.models import Agent

from .helpers import weave

pytestmark = pytest.mark.django_db

DATASETS = range(1, 13)


def lines(days: int, when: str) -> list[dict]:
    return [{"speaker": "Ana", "text": f"The retention period for dataset D{i} is {days} days.", "occurred_at": when}
            for i in DATASETS]


def pairs_flagged() -> set[tuple[str, str]]:
    return {(c.node_a.text, c.node_b.text) for c in Conflict.objects.select_related("node_a", "node_b")}


def expected() -> set[tuple[str, str]]:
    return {(f"The retention period for dataset D{i} is 30 days.", f"The retention period for dataset D{i} is 90 days.")
            for i in DATASETS}


def test_each_of_twelve_alike_statements_meets_the_one_about_its_own_dataset(world, client_for, no_llm):
    """As the audit did it: each new value written, and checked, in turn."""
    a = world["a"]
    c = client_for(a.key)
    weave(c, "old", turns=lines(30, "2024-11-04T10:00:00Z"), end=False)
    for i, turn in enumerate(lines(90, "2024-11-14T10:00:00Z")):
        node = weave(c, f"new{i}", turns=[turn], end=False)["node_ids"]
        assert conflicts.detect(org_id=a.org.id, node_ids=node) == 1, turn["text"]
    assert pairs_flagged() == expected()


def test_a_check_of_the_twelve_at_once(world, client_for, no_llm):
    """One write of the twelve new values: each one's nearest are the other eleven new lines."""
    a = world["a"]
    c = client_for(a.key)
    weave(c, "old", turns=lines(30, "2024-11-04T10:00:00Z"), end=False)
    new = weave(c, "new", turns=lines(90, "2024-11-14T10:00:00Z"), end=False)["node_ids"]
    assert conflicts.detect(org_id=a.org.id, node_ids=new) == 12
    assert pairs_flagged() == expected()
    # one at a time (a weave's own check) finds the same, and stores nothing twice
    assert all(conflicts.detect(org_id=a.org.id, node_ids=[n]) == 0 for n in new)


def test_a_line_sharing_only_common_words_brings_no_extra_conflict(world, client_for, no_llm):
    a = world["a"]
    c = client_for(a.key)
    weave(c, "old", turns=lines(30, "2024-11-04T10:00:00Z"), end=False)
    new = weave(c, "new", turns=lines(90, "2024-11-14T10:00:00Z"), end=False)["node_ids"]
    assert conflicts.detect(org_id=a.org.id, node_ids=new) == 12
    other = weave(c, "other", end=False, turns=[
        {"speaker": "Ana", "text": "The dataset catalogue of the Orion project lists the retention owners.",
         "occurred_at": "2024-11-15T10:00:00Z"}])["node_ids"]
    node = Node.objects.get(id=other[0])
    # it names an entity of its own, none of the twelve: its candidates are its nearest, no more
    assert node.entities == ["Orion"]
    assert len(conflicts._candidates_of([node])[node.id]) == conflicts.CANDIDATES
    assert conflicts.detect(org_id=a.org.id, node_ids=other) == 0
    assert pairs_flagged() == expected()


def test_the_named_candidates_of_the_shared_audience(world, client_for, no_llm):
    """Two agents of a team: the coder's twelve new values meet the planner's twelve old ones, each
    its own dataset's, through the shared-audience budget."""
    a = world["a"]
    team = {"visibility": "team", "team_id": a.team.id}
    keys = {}
    for name in ("planner", "coder"):
        agent = Agent.objects.create(org=a.org, name=name, team=a.team)
        keys[name] = team_services.api_key_create(actor=None, agent=agent, name="test")[1]
    weave(client_for(keys["planner"]), "p", turns=lines(30, "2024-11-04T10:00:00Z"), end=False, **team)
    new = weave(client_for(keys["coder"]), "c", turns=lines(90, "2024-11-14T10:00:00Z"), end=False, **team)["node_ids"]
    assert conflicts.detect(org_id=a.org.id, node_ids=new) == 12
    assert pairs_flagged() == expected()


def test_named_candidates_keep_to_the_audience(world, client_for, no_llm):
    """The same names in a private node of another writer, or in another org: never a candidate."""
    a, b = world["a"], world["b"]
    weave(client_for(a.member), "m", turns=lines(30, "2024-11-04T10:00:00Z"), end=False)  # private, another owner
    weave(client_for(b.key), "b", turns=lines(30, "2024-11-04T10:00:00Z"), end=False)  # another org
    new = weave(client_for(a.key), "new", turns=lines(90, "2024-11-14T10:00:00Z"), end=False,
                visibility="team", team_id=a.team.id)["node_ids"]
    got = conflicts._candidates_of(list(Node.objects.filter(id__in=new)))
    assert all(o.org_id == a.org.id and o.owner_agent_id == a.agent.id for cands in got.values() for o, _ in cands)
    assert conflicts.detect(org_id=a.org.id, node_ids=new) == 0
