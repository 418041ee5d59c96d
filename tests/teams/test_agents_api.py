from __future__ import annotations

import pytest

from teams.models import Agent

pytestmark = pytest.mark.django_db


def test_list_agents_own_org_only(world, client_for):
    r = client_for(world["a"].member).get("/api/v1/agents")
    assert r.status_code == 200
    assert [x["name"] for x in r.json()["results"]] == ["alpha-bot"]


def test_create_agent_with_team(world, client_for):
    a = world["a"]
    r = client_for(a.admin).post("/api/v1/agents", {"name": "scribe", "team_id": a.team.id}, format="json")
    assert r.status_code == 201 and r.json()["team_id"] == a.team.id
    # another org's team is not a valid team here
    r = client_for(a.admin).post("/api/v1/agents", {"name": "spy", "team_id": world["b"].team.id}, format="json")
    assert r.status_code == 400 and "team_id" in r.json()["error"]["fields"]
    assert not Agent.objects.filter(name="spy").exists()
    assert client_for(a.member).post("/api/v1/agents", {"name": "m"}, format="json").status_code == 403


def test_duplicate_agent_name_is_400(world, client_for):
    r = client_for(world["a"].owner).post("/api/v1/agents", {"name": "alpha-bot"}, format="json")
    assert r.status_code == 400


def test_other_org_agent_is_404(world, client_for):
    b_agent = world["b"].agent.id
    for who in (world["a"].owner, world["a"].key):
        c = client_for(who)
        assert c.get(f"/api/v1/agents/{b_agent}").status_code == 404
        assert c.patch(f"/api/v1/agents/{b_agent}", {"name": "x"}, format="json").status_code == 404
        assert c.delete(f"/api/v1/agents/{b_agent}").status_code == 404
        assert c.get(f"/api/v1/agents/{b_agent}/keys").status_code == 404
        assert c.post(f"/api/v1/agents/{b_agent}/keys", {}, format="json").status_code == 404


def test_deactivate_agent_revokes_its_keys(world, client_for):
    a = world["a"]
    assert client_for(a.key).get("/api/v1/org").status_code == 200
    r = client_for(a.owner).delete(f"/api/v1/agents/{a.agent.id}")
    assert r.status_code == 200 and r.json()["is_active"] is False
    assert client_for(a.key).get("/api/v1/org").status_code == 401


def test_an_agent_is_created_with_its_audit_entry_or_not_at_all(world, monkeypatch):
    # The audit entry is written in the same transaction: a failure to record it leaves no agent
    # behind that the audit log never heard of.
    from teams import services
    from teams.auth import Actor

    def broken(**_kw):
        raise RuntimeError("audit store down")

    monkeypatch.setattr(services.audit, "record", broken)
    a = world["a"]
    actor = Actor(org=a.org, user=a.owner, role="owner")
    with pytest.raises(RuntimeError):
        services.agent_create(actor=actor, name="ghost")
    assert not Agent.objects.filter(org=a.org, name="ghost").exists()
