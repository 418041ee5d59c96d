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


def _weave_as(c, text: str, visibility: str, team_id=None) -> int:
    body = {"text": text, "visibility": visibility, **({"team_id": team_id} if team_id else {})}
    r = c.post("/api/v1/memories/weave", body, format="json")
    assert r.status_code == 201, r.content
    return r.json()["node_ids"][0]


def test_visibility_and_team_filters_narrow_what_the_caller_reads(world, client_for):
    """The console's browser filters by visibility and team; the API refused both as unknown fields."""
    a = world["a"]
    member = client_for(a.member)  # in team core
    mine = _weave_as(member, "my private note", "private")
    team = _weave_as(member, "a team note", "team", a.team.id)
    org = _weave_as(member, "an org note", "org")
    other_private = _weave_as(client_for(a.admin), "the admin's private note", "private")

    def ids(c, **params):
        r = c.get("/api/v1/memories/nodes", params)
        assert r.status_code == 200, r.content
        return [n["id"] for n in r.json()["results"]]

    assert ids(member, visibility="org") == [org]
    assert ids(member, visibility="team") == [team]
    assert ids(member, visibility="private") == [mine]  # never another member's private node
    assert ids(member, team_id=a.team.id) == [team]
    assert ids(member, visibility="team", team_id=a.team.id) == [team]
    assert other_private not in ids(client_for(a.admin), visibility="org")
    assert ids(client_for(a.admin), visibility="private") == [other_private]
    assert ids(client_for(a.admin), visibility="team") == []  # the admin is not in core: filters only narrow

    r = member.get("/api/v1/memories/nodes", {"visibility": "everyone"})
    assert r.status_code == 400 and r.json()["error"]["fields"] == {"visibility": ["Unknown visibility."]}
    r = member.get("/api/v1/memories/nodes", {"team_id": world["b"].team.id})  # another org's team
    assert r.status_code == 400 and r.json()["error"]["fields"] == {"team_id": ["No such team."]}
    r = member.get("/api/v1/memories/nodes", {"team_id": "x"})
    assert r.status_code == 400 and "team_id" in r.json()["error"]["fields"]
