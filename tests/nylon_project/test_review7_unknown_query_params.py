"""GET endpoints refuse query parameters they do not know with a 400 naming them, as the node list
always did: before, /context, /assets, /conflicts and the lists without filters answered 200 as if
a misspelt parameter had been applied."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def _unknown(r, *names):
    assert r.status_code == 400, r.content
    assert r.json()["error"]["fields"] == {n: ["Unknown field."] for n in names}


@pytest.mark.parametrize("url", ["/api/v1/context", "/api/v1/assets", "/api/v1/conflicts", "/api/v1/memories/nodes",
                                 "/api/v1/teams", "/api/v1/agents", "/api/v1/invitations"])
def test_unknown_query_parameters_are_refused(world, client_for, url):
    if url == "/api/v1/context":  # not a list: it has no paging parameters either
        _unknown(client_for(world["a"].key).get(url, {"foo": "1", "query": "x", "limit": "5"}), "foo", "limit")
    else:
        _unknown(client_for(world["a"].owner).get(url, {"foo": "1", "limit": "5"}), "foo")


def test_known_parameters_still_work(world, client_for):
    a = world["a"]
    assert client_for(a.key).get("/api/v1/context", {"query": "x", "k": "3", "reinforce": "false"}).status_code == 200
    r = client_for(a.owner).get("/api/v1/assets", {"kind": "skill", "status": "draft", "limit": "5"})
    assert r.status_code == 200, r.content
    r = client_for(a.owner).get("/api/v1/assets", {"kind": "nope"})
    assert r.status_code == 400 and r.json()["error"]["fields"] == {"kind": ["Unknown value."]}
    r = client_for(a.owner).get("/api/v1/conflicts", {"status": "nope"})
    assert r.status_code == 400 and r.json()["error"]["fields"] == {"status": ["Unknown status."]}
    assert client_for(a.owner).get("/api/v1/conflicts", {"status": "open", "limit": "2"}).status_code == 200
    assert client_for(a.owner).get("/api/v1/teams", {"limit": "1"}).status_code == 200
    assert client_for(a.owner).get(f"/api/v1/teams/{a.team.id}/members", {"limit": "1"}).status_code == 200
    _unknown(client_for(a.owner).get(f"/api/v1/teams/{a.team.id}/members", {"role": "admin"}), "role")


@pytest.mark.parametrize("url", ["/api/v1/org", "/api/v1/ping", "/api/v1/background/status", "/api/v1/proxy/stats"])
def test_views_without_parameters_refuse_any(world, client_for, url):
    a = world["a"]
    assert client_for(a.owner).get(url).status_code == 200
    _unknown(client_for(a.owner).get(url, {"verbose": "1"}), "verbose")


def test_detail_views_refuse_parameters(world, client_for):
    a = world["a"]
    ok = client_for(a.owner).get(f"/api/v1/teams/{a.team.id}")
    assert ok.status_code == 200, ok.content
    _unknown(client_for(a.owner).get(f"/api/v1/teams/{a.team.id}", {"expand": "members"}), "expand")
