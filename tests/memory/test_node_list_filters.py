"""GET memories/nodes: its filters are strict, as the other list endpoints'."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def _weave(c, key: str, text: str) -> int:
    r = c.post("/api/v1/memories/weave", {"text": text, "session_key": key}, format="json")
    assert r.status_code == 201, r.content
    return r.json()["node_ids"][0]


def test_a_misspelt_filter_is_a_400_not_every_node(world, client_for):
    c = client_for(world["a"].key)
    _weave(c, "s1", "one")
    r = c.get("/api/v1/memories/nodes", {"session": "s2"})
    assert r.status_code == 400
    assert r.json()["error"]["fields"] == {"session": ["Unknown field."]}


def test_filters_and_paging_still_work(world, client_for):
    c = client_for(world["a"].key)
    a, b = _weave(c, "s1", "one"), _weave(c, "s2", "two")
    assert [n["id"] for n in c.get("/api/v1/memories/nodes", {"session_key": "s1"}).json()["results"]] == [a]
    assert [n["id"] for n in c.get("/api/v1/memories/nodes", {"session_key": ""}).json()["results"]] == [b, a]
    page = c.get("/api/v1/memories/nodes", {"kind": "leaf", "limit": 1}).json()
    assert [n["id"] for n in page["results"]] == [b] and page["next"]
    assert [n["id"] for n in c.get(page["next"]).json()["results"]] == [a]
    r = c.get("/api/v1/memories/nodes", {"kind": "nope"})
    assert r.status_code == 400 and r.json()["error"]["fields"] == {"kind": ["Unknown kind."]}
