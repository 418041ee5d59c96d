"""A hidden node that bridges two visible nodes must not change anything for a reader who may
not see it: same hits, same scores, same explanations as the graph without the hidden node."""

from __future__ import annotations

import pytest

from memory.cache import get_cache
from memory.models import Node

from .helpers import grant, weave

pytestmark = pytest.mark.django_db

T = "2024-05-08T10:00:00Z"
V1 = "Priya signed off the Falcon launch checklist for the spring release."
H = "The Falcon launch hinges on the Orion vendor contract that Priya negotiated quietly."
V2 = "The Orion contract renewal is due in June and needs legal review."
FILLER = ["The cafeteria now serves ramen on Thursdays.", "Parking passes expire at the end of the quarter."]
QUERY = "Who signed off the Falcon launch checklist?"


@pytest.fixture(autouse=True)
def fresh_cache():
    get_cache().drop()
    yield
    get_cache().drop()


def _build(client, *, hidden_visibility: str, remove_hidden: bool) -> dict:
    ids = {}
    for i, text in enumerate(FILLER):
        ids[f"f{i}"] = weave(client, text, visibility="org", session="other", occurred_at=T)
    ids["v1"] = weave(client, V1, visibility="org", session="s", occurred_at=T)
    ids["h"] = weave(client, H, visibility=hidden_visibility, session="s", occurred_at=T)
    ids["v2"] = weave(client, V2, visibility="org", session="s", occurred_at=T)
    if remove_hidden:
        # The control: the very same graph (same sessions, sequence numbers and edges among the
        # visible nodes) with the hidden node and its edges gone, as if it had never been written.
        Node.objects.filter(id=ids.pop("h")).delete()
    return ids


def _answer(client, ids: dict) -> list[tuple]:
    names = {v: k for k, v in ids.items()}
    r = client.post("/api/v1/memories/resonate", {"query": QUERY, "k": 10, "depth": 3, "reinforce": False},
                    format="json")
    assert r.status_code == 200, r.content
    return [(names.get(h["node_id"], "?"), h["score"], [names.get(p, "?") for p in h["explanation"]["path"]],
             h["explanation"]["hops"], _rounded(h["explanation"]["parts"])) for h in r.json()["hits"]]


def _rounded(parts: dict) -> dict:
    # Tension decays with wall-clock time since each write (milliseconds apart here): it is compared
    # with a tolerance by _same; every other part must be identical.
    return {k: round(v, 6) if isinstance(v, float) else v for k, v in parts.items()}


def _same(seen: list[tuple], control: list[tuple]) -> bool:
    def split(rows):
        exact = [(n, p, hops, {k: v for k, v in parts.items() if k not in ("tension", "final")})
                 for n, _, p, hops, parts in rows]
        loose = [x for _, score, _, _, parts in rows for x in (score, parts.get("tension", 0.0), parts["final"])]
        return exact, loose

    (e1, l1), (e2, l2) = split(seen), split(control)
    return e1 == e2 and l1 == pytest.approx(l2, abs=1e-4)


@pytest.mark.parametrize("hidden_visibility", ["private", "restricted"])
def test_hidden_bridge_changes_nothing_for_those_who_cannot_see_it(world, client_for, hidden_visibility):
    a, b = world["a"], world["b"]
    with_hidden = _build(client_for(a.owner), hidden_visibility=hidden_visibility, remove_hidden=False)
    without = _build(client_for(b.owner), hidden_visibility=hidden_visibility, remove_hidden=True)

    # The bridge is real: its writer reaches V2 through it, so a leak would change the answer.
    mine = _answer(client_for(a.owner), with_hidden)
    assert any(name == "h" for name, *_ in mine)
    assert any("h" in path for _, _, path, _, _ in mine), mine

    for reader_a, reader_b in ((a.member, b.member), (a.admin, b.admin), (a.key, b.key)):
        seen = _answer(client_for(reader_a), with_hidden)
        control = _answer(client_for(reader_b), without)
        assert _same(seen, control), (seen, control)  # same hits, order, scores, paths, score parts
        assert all(name != "h" and "h" not in path for name, _, path, _, _ in seen)
        assert any(name == "v1" for name, *_ in seen)


def test_a_grant_opens_the_bridge_and_only_for_the_grantee(world, client_for):
    a = world["a"]
    ids = _build(client_for(a.owner), hidden_visibility="restricted", remove_hidden=False)
    before = _answer(client_for(a.member), ids)
    grant(client_for(a.owner), "node", ids["h"], grantee_kind="user", user_id=a.member.id)
    after = _answer(client_for(a.member), ids)
    assert any(name == "h" for name, *_ in after) and after != before
    assert all(name != "h" for name, *_ in _answer(client_for(a.admin), ids))  # admins are not grantees
