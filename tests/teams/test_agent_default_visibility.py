"""An agent's default visibility: what its writes get when they name none. A team's agents share what
they write with the team unless told otherwise; before, every write that named no visibility was
private, so three agents of one team shared nothing unless each call opted in."""

from __future__ import annotations

import pytest

from memory.models import Node
from teams import services
from teams.models import Agent

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]


def _agent(client, **body) -> dict:
    r = client.post("/api/v1/agents", body, format="json")
    assert r.status_code == 201, r.content
    return r.json()


def _key(agent_id: int) -> str:
    return services.api_key_create(actor=None, agent=Agent.objects.get(id=agent_id), name="k")[1]


def test_new_agent_in_a_team_shares_with_it_and_one_without_keeps_private(world, client_for):
    a = world["a"]
    admin = client_for(a.owner)
    assert _agent(admin, name="coder", team_id=a.team.id)["default_visibility"] == "team"
    assert _agent(admin, name="loner")["default_visibility"] == "private"
    assert _agent(admin, name="herald", default_visibility="org")["default_visibility"] == "org"
    r = admin.post("/api/v1/agents", {"name": "x", "default_visibility": "team"}, format="json")
    assert r.status_code == 400 and "default_visibility" in r.json()["error"]["fields"]
    r = admin.post("/api/v1/agents", {"name": "y", "default_visibility": "restricted"}, format="json")
    assert r.status_code == 400 and "default_visibility" in r.json()["error"]["fields"]


def test_patch_changes_it_and_leaving_the_team_makes_it_private(world, client_for):
    a = world["a"]
    admin = client_for(a.owner)
    ag = _agent(admin, name="coder", team_id=a.team.id)
    r = admin.patch(f"/api/v1/agents/{ag['id']}", {"default_visibility": "org"}, format="json")
    assert r.status_code == 200 and r.json()["default_visibility"] == "org"
    admin.patch(f"/api/v1/agents/{ag['id']}", {"default_visibility": "team"}, format="json")
    r = admin.patch(f"/api/v1/agents/{ag['id']}", {"team_id": None}, format="json")
    assert r.status_code == 200 and r.json()["default_visibility"] == "private"
    r = admin.patch(f"/api/v1/agents/{ag['id']}", {"default_visibility": "team"}, format="json")
    assert r.status_code == 400 and "default_visibility" in r.json()["error"]["fields"]
    r = client_for(a.member).patch(f"/api/v1/agents/{ag['id']}", {"default_visibility": "org"}, format="json")
    assert r.status_code == 403
    assert Agent.objects.get(id=ag["id"]).default_visibility == "private"


def test_writes_that_name_no_visibility_get_the_agents_default(world, client_for):
    a = world["a"]
    admin = client_for(a.owner)
    planner = client_for(_key(_agent(admin, name="planner", team_id=a.team.id)["id"]))
    coder = client_for(_key(_agent(admin, name="coder", team_id=a.team.id)["id"]))
    r = coder.post("/api/v1/memories/weave", {"text": "Webhook retries make 5 attempts."}, format="json")
    assert r.status_code == 201, r.content
    node = Node.objects.get(id=r.json()["node_ids"][0])
    assert (node.visibility, node.team_id) == ("team", a.team.id)
    hits = planner.post("/api/v1/memories/resonate", {"query": "How many attempts do webhook retries make?"},
                        format="json").json()["hits"]
    assert hits and hits[0]["node_id"] == node.id  # the team reads it

    r = coder.post("/api/v1/memories/weave-session",
                   {"session_key": "s1", "turns": [{"speaker": "coder", "text": "Merged the retry fix."}]},
                   format="json")
    assert Node.objects.get(id=r.json()["node_ids"][0]).visibility == "team"
    r = coder.post("/api/v1/memories/weave", {"text": "A note for me.", "visibility": "private"}, format="json")
    assert Node.objects.get(id=r.json()["node_ids"][0]).visibility == "private"  # naming one still wins
    # the fixture's agent was made before the field (the model default): private, as it always was
    r = client_for(a.key).post("/api/v1/memories/weave", {"text": "Old agent note."}, format="json")
    assert Node.objects.get(id=r.json()["node_ids"][0]).visibility == "private"
    # a person's writes stay private
    r = client_for(a.member).post("/api/v1/memories/weave", {"text": "My own note."}, format="json")
    assert Node.objects.get(id=r.json()["node_ids"][0]).visibility == "private"


def test_bulk_sessions_without_visibility_get_the_default(world, client_for):
    import json

    a = world["a"]
    coder = client_for(_key(_agent(client_for(a.owner), name="coder", team_id=a.team.id)["id"]))
    lines = "\n".join(json.dumps(s) for s in [
        {"session_key": "b1", "turns": [{"speaker": "coder", "text": "Deployed release 4.2."}]},
        {"session_key": "b2", "visibility": "org", "turns": [{"speaker": "coder", "text": "Office closed Friday."}]},
    ])
    r = coder.generic("POST", "/api/v1/memories/bulk?embed=false", lines, content_type="application/x-ndjson")
    assert r.status_code in (200, 201, 202), r.content
    got = dict(Node.objects.filter(org=a.org, session_key__in=["b1", "b2"]).values_list("session_key", "visibility"))
    assert got == {"b1": "team", "b2": "org"}


def test_console_agent_page_sets_it(world, client_for):
    from django.test import Client

    a = world["a"]
    agent = Agent.objects.create(org=a.org, name="support", team=a.team)
    c = Client()
    c.force_login(a.owner)
    page = c.get(f"/console/agents/{agent.id}/")
    assert page.status_code == 200 and b"agent-sharing-form" in page.content
    r = c.post(f"/console/agents/{agent.id}/", {"op": "sharing", "default_visibility": "org"})
    assert r.status_code == 302
    assert Agent.objects.get(id=agent.id).default_visibility == "org"
    r = c.post("/console/agents/", {"name": "triage", "team": str(a.team.id), "default_visibility": ""})
    assert r.status_code == 302
    assert Agent.objects.get(org=a.org, name="triage").default_visibility == "team"


def test_mcp_weave_and_proxy_write_back_use_the_default(world, client_for):
    from assets.mcp import tool_weave
    from proxy.writeback import write_back
    from teams.auth import actor_for_agent
    from teams.models import ApiKey

    a = world["a"]
    ag = Agent.objects.get(id=_agent(client_for(a.owner), name="coder", team_id=a.team.id)["id"])
    actor = actor_for_agent(ag, scopes=frozenset({"read", "write"}))
    out = tool_weave(actor, text="Staging runs Postgres 16.4.")
    assert Node.objects.get(id=out["node_ids"][0]).visibility == "team"
    out = tool_weave(actor, text="Only mine.", visibility="private")
    assert Node.objects.get(id=out["node_ids"][0]).visibility == "private"

    _key(ag.id)
    key = ApiKey.objects.filter(agent=ag).latest("id")
    ids = write_back(key_id=key.id, session_key="proxy-1", turns=[
        {"text": "Which Postgres does staging run?", "speaker": "user", "event_id": "p1"},
        {"text": "Staging runs Postgres 16.4.", "speaker": "assistant", "event_id": "p2"}])
    assert {Node.objects.get(id=i).visibility for i in ids} == {"team"}
