"""Every console page through the Django test client, as owner, admin, member, outsider, another
org's users and nobody: the console shows exactly what the API would, and nothing of other orgs."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model

from assets.models import AuditEvent
from memory.models import Edge, Node, Visibility
from memory.services import flush_recalls
from teams.auth import hash_secret
from teams.models import Agent, ApiKey, Membership, Role, Team, TeamMembership
from tests.teams.invites import sign_up

from .conftest import actor, weave

pytestmark = pytest.mark.django_db

PAGES = ["/console/", "/console/memories/", "/console/resonate/", "/console/teams/", "/console/members/",
         "/console/agents/", "/console/health", "/console/feed/nodes?ids=1"]


def node_ids_in(html: str) -> set[int]:
    return {int(x) for x in re.findall(r'data-node-id="(\d+)"', html)}


# --- sign-in, anonymous, outsider -------------------------------------------------------------------


@pytest.mark.parametrize("url", PAGES + ["/console/audit/", "/console/memories/1/", "/console/agents/1/"])
def test_anonymous_is_sent_to_login(url, login):
    r = login(None).get(url)
    assert r.status_code == 302 and r["Location"].startswith("/login/?next=")


def test_anonymous_htmx_request_gets_401_with_redirect_header(login):
    r = login(None).get("/console/health", HTTP_HX_REQUEST="true")
    assert r.status_code == 401 and r["HX-Redirect"] == "/login/"


def test_login_page_and_password_login_and_logout(world, login):
    c = login(None)
    r = c.get("/login/")
    assert r.status_code == 200 and b'name="password"' in r.content
    r = c.post("/login/", {"username": "alpha-member", "password": "wrong"})
    assert r.status_code == 200 and b"console" not in r.url.encode() if hasattr(r, "url") else True
    r = c.post("/login/", {"username": "alpha-member", "password": "pw-member-123"})
    assert r.status_code == 302 and r["Location"] == "/console/"
    assert c.get("/console/").status_code == 200
    assert c.get("/logout/").status_code == 405  # logout is a POST (CSRF-protected)
    r = c.post("/logout/")
    assert r.status_code == 302 and r["Location"] == "/login/"
    assert c.get("/console/").status_code == 302


def test_root_redirects_to_console(login):
    assert login(None).get("/")["Location"] == "/console/"


@pytest.mark.parametrize("url", PAGES + ["/console/audit/"])
def test_outsider_gets_no_org_page_and_no_data(url, world, mem, login):
    r = login(world["outsider"]).get(url)
    assert r.status_code == 403
    body = r.content.decode()
    assert "not a member of any organisation" in body
    assert "Lisbon" not in body and "alpha" not in body.lower().replace("alpha-", "")


def test_outsider_cannot_reach_objects_of_any_org(world, mem, login):
    c = login(world["outsider"])
    a = world["a"]
    for url in (f"/console/memories/{mem.owner_org}/", f"/console/memories/{mem.owner_org}/graph.json",
                f"/console/teams/{a.team.id}/", f"/console/agents/{a.agent.id}/"):
        assert c.get(url).status_code == 403, url
    assert c.post(f"/console/memories/{mem.owner_org}/delete").status_code == 403
    assert Node.objects.filter(id=mem.owner_org, deleted_at__isnull=True).exists()


# --- dashboard ------------------------------------------------------------------------------------


def test_dashboard_counts_only_visible_memories(world, mem, login):
    r = login(world["a"].member).get("/console/")
    assert r.status_code == 200
    html = r.content.decode()
    # member sees: own private, team, owner's org, agent's org = 4 (not the owner's private, not beta)
    assert re.search(r'id="node-total">4<', html), html
    assert "Writes per hour" in html and "<rect" in html
    r = login(world["a"].owner).get("/console/")
    # owner sees: own private, owner org, agent org (team node: owner is not in the core team) = 3
    assert re.search(r'id="node-total">3<', r.content.decode())


def test_dashboard_shows_conflicts_between_visible_nodes(world, mem, login):
    from reflection.models import Conflict

    a = world["a"]
    lo, hi = sorted([mem.owner_org, mem.agent_org])
    Conflict.objects.create(org=a.org, node_a_id=lo, node_b_id=hi, reason="dates disagree", detector="rule")
    lo2, hi2 = sorted([mem.owner_org, mem.owner_private])
    Conflict.objects.create(org=a.org, node_a_id=lo2, node_b_id=hi2, reason="hidden pair", detector="rule")
    html = login(a.member).get("/console/").content.decode()
    assert "dates disagree" in html and "hidden pair" not in html


def test_health_panel_reuses_health_checks(world, login):
    r = login(world["a"].member).get("/console/health")
    assert r.status_code == 200
    html = r.content.decode()
    for name in ("database", "redis", "worker", "queue", "embedder", "llm"):
        assert f"<td>{name}</td>" in html
    assert "status-ok" in html  # the database at least


# --- memory browser -------------------------------------------------------------------------------


def test_browser_lists_only_visible_nodes(world, mem, login):
    html = login(world["a"].member).get("/console/memories/").content.decode()
    assert node_ids_in(html) == {mem.member_private, mem.member_team, mem.owner_org, mem.agent_org}
    assert "Owner secret" not in html and "Beta" not in html
    html = login(world["b"].owner).get("/console/memories/").content.decode()
    assert node_ids_in(html) == {mem.beta_org}


@pytest.mark.parametrize("query,expected", [
    ("kind=leaf", {"member_private", "member_team", "owner_org", "agent_org"}),
    ("kind=fact", set()),
    ("visibility=team", {"member_team"}),
    ("visibility=private", {"member_private"}),
    ("owner=me", {"member_private", "member_team"}),
    ("q=Alfama", {"member_team"}),
    ("q=flights+booked", {"agent_org"}),
    ("q=%22March+14%22", {"owner_org"}),
    ("since=2000-01-01&until=2999-01-01", {"member_private", "member_team", "owner_org", "agent_org"}),
    ("until=2000-01-01", set()),
])
def test_browser_filters(query, expected, world, mem, login):
    html = login(world["a"].member).get(f"/console/memories/?{query}").content.decode()
    assert node_ids_in(html) == {getattr(mem, name) for name in expected}


def test_browser_filters_by_owner_and_team(world, mem, login):
    a = world["a"]
    c = login(a.member)
    assert node_ids_in(c.get(f"/console/memories/?owner=agent:{a.agent.id}").content.decode()) == {mem.agent_org}
    assert node_ids_in(c.get(f"/console/memories/?owner=user:{a.owner.id}").content.decode()) == {mem.owner_org}
    assert node_ids_in(c.get(f"/console/memories/?team={a.team.id}").content.decode()) == {mem.member_team}
    # Another org's team is not a choice: a validation error, never its data.
    r = c.get(f"/console/memories/?team={world['b'].team.id}")
    assert r.status_code == 400 and not node_ids_in(r.content.decode())


def test_browser_keyset_pagination(world, login):
    a = world["a"]
    ids = weave(actor(a.owner, a.org), *[f"Note number {i} about rollout." for i in range(120)])
    c = login(a.owner)
    seen: list[int] = []
    url = "/console/memories/?limit=50"
    pages = 0
    while url:
        html = c.get(url).content.decode()
        got = sorted(node_ids_in(html), reverse=True)
        seen += got
        pages += 1
        m = re.search(r'href="\?([^"]*after=\d+[^"]*)"', html)
        url = "/console/memories/?" + m.group(1).replace("&amp;", "&") if m else None
    assert pages == 3 and seen == sorted(ids, reverse=True)
    # htmx "load more" returns rows only
    r = c.get(f"/console/memories/?after={ids[-1]}&partial=rows", HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and "<html" not in r.content.decode() and len(node_ids_in(r.content.decode())) == 50


def test_browser_bad_filter_is_400(world, login):
    assert login(world["a"].member).get("/console/memories/?kind=nope").status_code == 400
    assert login(world["a"].member).get("/console/memories/?after=-3").status_code == 400


# --- node drawer, delete --------------------------------------------------------------------------


def test_drawer_shows_silks_tension_lineage_edges(world, mem, login):
    a = world["a"]
    ids = weave(actor(a.member, a.org), "Ana met Ben in Porto yesterday.", "Ben was happy about Porto!",
                session_key="porto")
    src = Node.objects.get(id=ids[0])
    Node.objects.filter(id=ids[1]).update(source_node_ids=[ids[0], mem.owner_private])
    c = login(a.member)
    r = c.get(f"/console/memories/{ids[1]}/", HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    html = r.content.decode()
    assert "<html" not in html  # a partial for the drawer
    for silk in ("Fact", "Relations", "Temporal", "Emotion", "Frequency", "Provenance"):
        assert f"<dt>{silk}</dt>" in html
    assert "Porto" in html and "polyline" in html and "T(now)" in html
    assert "temporal_next" in html and f"#{src.id}" in html
    assert "1 source you cannot see" in html  # the owner's private source is counted, not shown
    assert "Owner secret" not in html
    assert 'id="node-delete"' in html  # own node
    full = c.get(f"/console/memories/{ids[1]}/")
    assert full.status_code == 200 and "<html" in full.content.decode()


def test_drawer_is_404_for_hidden_and_foreign_nodes(world, mem, login):
    c = login(world["a"].member)
    for nid in (mem.owner_private, mem.beta_org, mem.beta_private, 999_999_999):
        assert c.get(f"/console/memories/{nid}/").status_code == 404, nid
        assert c.get(f"/console/memories/{nid}/graph/").status_code == 404, nid
        assert c.get(f"/console/memories/{nid}/graph.json").status_code == 404, nid
    # admins and owners do not see private nodes of others either
    assert login(world["a"].owner).get(f"/console/memories/{mem.member_private}/").status_code == 404
    assert login(world["a"].admin).get(f"/console/memories/{mem.member_private}/").status_code == 404


def test_delete_where_allowed(world, mem, login):
    a = world["a"]
    member = login(a.member)
    # not the owner of an org node: no button, and the POST is refused
    html = member.get(f"/console/memories/{mem.owner_org}/").content.decode()
    assert 'id="node-delete"' not in html
    assert member.post(f"/console/memories/{mem.owner_org}/delete").status_code == 403
    # another org's node does not exist
    assert member.post(f"/console/memories/{mem.beta_org}/delete").status_code == 404
    # own node: deleted (soft) and audited
    r = member.post(f"/console/memories/{mem.member_private}/delete")
    assert r.status_code == 302 and r["Location"] == "/console/memories/"
    assert Node.objects.get(id=mem.member_private).deleted_at is not None
    assert AuditEvent.objects.filter(org=a.org, action="memory.delete", object_id=str(mem.member_private)).exists()
    assert member.get(f"/console/memories/{mem.member_private}/").status_code == 404
    # an org admin may delete an org node
    assert login(a.admin).post(f"/console/memories/{mem.owner_org}/delete").status_code == 302
    assert login(a.admin).get("/console/memories/1/delete").status_code == 405


# --- graph ----------------------------------------------------------------------------------------


def test_graph_json_never_steps_through_hidden_nodes(world, login):
    a = world["a"]
    member = actor(a.member, a.org)
    first = weave(member, "Kickoff: planning the Berlin launch.", session_key="launch")[0]
    hidden = weave(member, "Private aside about the Berlin launch.", session_key="launch",
                   visibility=Visibility.PRIVATE)[0]
    third = weave(member, "Berlin launch moved to May.", session_key="launch")[0]
    # A chain first → hidden → third only (drop the entity/similarity links the weave added).
    Edge.objects.filter(org=a.org).delete()
    Edge.objects.create(org=a.org, src_id=first, dst_id=hidden, kind="temporal_next", weight=0.9)
    Edge.objects.create(org=a.org, src_id=hidden, dst_id=third, kind="temporal_next", weight=0.9)
    mine = login(a.member).get(f"/console/memories/{first}/graph.json?depth=2").json()
    assert {n["id"] for n in mine["nodes"]} >= {first, hidden, third}
    assert all(e["color"].startswith("#") and e["kind"] for e in mine["edges"])
    theirs = login(a.owner).get(f"/console/memories/{first}/graph.json?depth=3").json()
    ids = {n["id"] for n in theirs["nodes"]}
    assert hidden not in ids and third not in ids and first in ids
    assert all(e["from"] in ids and e["to"] in ids for e in theirs["edges"])
    page = login(a.owner).get(f"/console/memories/{first}/graph/")
    assert page.status_code == 200 and b"vis-network.min.js" in page.content


# --- resonate -------------------------------------------------------------------------------------


def test_resonate_playground_explains_and_respects_visibility(world, mem, login):
    c = login(world["a"].member)
    assert c.get("/console/resonate/").status_code == 200
    r = c.post("/console/resonate/", {"query": "What about Lisbon?", "k": 10}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    html = r.content.decode()
    assert 'id="route-depth"' in html and "Channel ranks" in html and "Score parts" in html
    assert "Owner secret" not in html and "Beta" not in html
    assert "Lisbon" in html
    assert flush_recalls().marks == 0  # the playground does not reinforce by default
    r = c.post("/console/resonate/", {"query": "What about Lisbon?", "k": 3, "depth": 0, "reinforce": "on"})
    assert r.status_code == 200 and "<html" in r.content.decode()
    assert re.search(r'id="route-depth">0<', r.content.decode())
    assert flush_recalls().nodes > 0
    assert Node.objects.filter(org=world["a"].org, mentions__gt=0).exists()
    assert c.post("/console/resonate/", {"query": "", "k": 10}, HTTP_HX_REQUEST="true").status_code == 400


# --- teams ----------------------------------------------------------------------------------------


def test_teams_pages_by_role(world, login):
    a, b = world["a"], world["b"]
    member, admin = login(a.member), login(a.admin)
    html = member.get("/console/teams/").content.decode()
    assert a.team.name in html and b.team.name not in html and 'id="team-create"' not in html
    assert member.post("/console/teams/", {"name": "Rogue"}).status_code == 403
    assert not Team.objects.filter(name="Rogue").exists()
    r = admin.post("/console/teams/", {"name": "Research", "description": "R&D"})
    team = Team.objects.get(org=a.org, name="Research")
    assert r.status_code == 302 and r["Location"] == f"/console/teams/{team.id}/"
    assert member.get(f"/console/teams/{b.team.id}/").status_code == 404
    assert admin.post(f"/console/teams/{b.team.id}/", {"op": "delete"}).status_code == 404
    # team membership: admin adds, member may not change
    r = admin.post(f"/console/teams/{team.id}/", {"op": "add", "user_id": a.member.id, "role": "admin"})
    assert r.status_code == 302
    assert TeamMembership.objects.get(team=team, user=a.member).role == "admin"
    assert member.post(f"/console/teams/{a.team.id}/", {"op": "remove", "user_id": a.member.id}).status_code == 403
    # a user of another org cannot be added
    r = admin.post(f"/console/teams/{team.id}/", {"op": "add", "user_id": b.member.id, "role": "member"})
    assert r.status_code == 400 and not TeamMembership.objects.filter(team=team, user=b.member).exists()
    # the member is now a team admin of Research: may edit it but not delete it (org admins only)
    assert member.post(f"/console/teams/{team.id}/", {"op": "edit", "name": "Research 2"}).status_code == 302
    assert member.post(f"/console/teams/{team.id}/", {"op": "delete"}).status_code == 403
    assert admin.post(f"/console/teams/{team.id}/", {"op": "delete"}).status_code == 302
    assert not Team.objects.filter(id=team.id).exists()


# --- members --------------------------------------------------------------------------------------


def test_members_pages_by_role(world, login):
    a, b = world["a"], world["b"]
    member, admin, owner = login(a.member), login(a.admin), login(a.owner)
    html = member.get("/console/members/").content.decode()
    assert "alpha-admin" in html and "beta-" not in html and 'id="member-add"' not in html
    assert member.post("/console/members/", {"email": "x@example.com", "role": "member"}).status_code == 403
    r = admin.post("/console/members/", {"email": "new@example.com", "role": "member"})
    assert r.status_code == 200  # an invitation, its link shown once
    sign_up(r.context["invite_url"])
    new = get_user_model().objects.get(email="new@example.com")
    assert Membership.objects.get(org=a.org, user=new).role == Role.MEMBER
    # an admin may not make owners; an owner may
    assert admin.post(f"/console/members/{new.id}", {"role": "owner"}).status_code == 403
    assert owner.post(f"/console/members/{new.id}", {"role": "admin"}).status_code == 302
    assert Membership.objects.get(org=a.org, user=new).role == Role.ADMIN
    assert member.post(f"/console/members/{new.id}", {"op": "remove"}).status_code == 403
    assert admin.post(f"/console/members/{b.member.id}", {"role": "admin"}).status_code == 404
    assert admin.post(f"/console/members/{new.id}", {"op": "remove"}).status_code == 302
    assert not Membership.objects.filter(org=a.org, user=new).exists()


# --- agents and keys ------------------------------------------------------------------------------


def test_agent_create_key_shown_once_and_revoke(world, login):
    a = world["a"]
    admin = login(a.admin)
    r = admin.post("/console/agents/", {"name": "planner", "description": "plans", "team": a.team.id})
    agent = Agent.objects.get(org=a.org, name="planner")
    assert r.status_code == 302 and agent.team_id == a.team.id
    r = admin.post(f"/console/agents/{agent.id}/", {"op": "key", "name": "ci", "scopes": ["read"]}, follow=True)
    assert r.redirect_chain[0][1] == 303 and r.status_code == 200 and "no-store" in r["Cache-Control"]
    plain = re.search(r'id="plain-key-value">(nyl_[^<]+)<', r.content.decode()).group(1)
    key = ApiKey.objects.get(agent=agent)
    assert key.scopes == ["read"] and key.secret_hash == hash_secret(plain.split("_", 2)[2])
    again = admin.get(f"/console/agents/{agent.id}/").content.decode()
    assert plain not in again and key.prefix in again
    # the key works against the API
    assert login(None).get("/api/v1/org", HTTP_AUTHORIZATION=f"Bearer {plain}").status_code == 200
    r = admin.post(f"/console/keys/{key.id}/revoke")
    assert r.status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert login(None).get("/api/v1/org", HTTP_AUTHORIZATION=f"Bearer {plain}").status_code == 401
    assert AuditEvent.objects.filter(org=a.org, action__in=["key.create", "key.revoke"]).count() >= 2


def test_agents_pages_deny_members_and_other_orgs(world, login):
    a, b = world["a"], world["b"]
    member, admin = login(a.member), login(a.admin)
    html = member.get("/console/agents/").content.decode()
    assert a.agent.name in html and b.agent.name not in html and 'id="agent-create"' not in html
    detail = member.get(f"/console/agents/{a.agent.id}/").content.decode()
    assert "managed by organisation admins" in detail and 'id="key-table"' not in detail
    assert member.post("/console/agents/", {"name": "sneaky"}).status_code == 403
    assert member.post(f"/console/agents/{a.agent.id}/", {"op": "key", "scopes": ["read"]}).status_code == 403
    assert ApiKey.objects.filter(agent=a.agent).count() == 1
    b_key = ApiKey.objects.get(agent=b.agent)
    assert admin.get(f"/console/agents/{b.agent.id}/").status_code == 404
    assert admin.post(f"/console/keys/{b_key.id}/revoke").status_code == 404
    assert member.post(f"/console/keys/{ApiKey.objects.get(agent=a.agent).id}/revoke").status_code == 403
    b_key.refresh_from_db()
    assert b_key.revoked_at is None
    # deactivation revokes every key
    assert admin.post(f"/console/agents/{a.agent.id}/", {"op": "deactivate"}).status_code == 302
    assert not ApiKey.objects.filter(agent=a.agent, revoked_at__isnull=True).exists()


# --- audit ----------------------------------------------------------------------------------------


def test_audit_is_for_org_admins_with_filters(world, mem, login):
    a = world["a"]
    assert login(a.member).get("/console/audit/").status_code == 403
    assert "Audit" not in login(a.member).get("/console/").content.decode().split("<main>")[0]
    admin = login(a.admin)
    html = admin.get("/console/audit/").content.decode()
    assert "memory.weave" in html and "beta" not in html.lower().replace("alphabet", "")
    html = admin.get("/console/audit/?action=key.").content.decode()
    assert "key.create" in html and "memory.weave" not in html
    html = admin.get("/console/audit/?outcome=denied").content.decode()
    assert "memory.weave" not in html
    for i in range(60):
        AuditEvent.objects.create(org=a.org, actor_kind="system", actor_label="system", action="test.bulk",
                                  object_type="x", object_id=str(i))
    html = admin.get("/console/audit/?action=test.").content.decode()
    m = re.search(r'id="audit-next" href="|href="\?([^"]*after=\d+[^"]*)" id="audit-next"', html)
    assert m and html.count("test.bulk") == 50
    html2 = admin.get("/console/audit/?" + m.group(1).replace("&amp;", "&")).content.decode()
    assert html2.count("test.bulk") == 10
    assert login(a.owner).get("/console/audit/").status_code == 200


# --- org switcher, live feed, static --------------------------------------------------------------


def test_org_switcher(world, mem, login):
    a, b = world["a"], world["b"]
    Membership.objects.create(org=b.org, user=a.member, role=Role.MEMBER)
    c = login(a.member)
    html = c.get("/console/").content.decode()
    assert 'id="org-switch"' in html and "BETA" in html
    r = c.post("/console/org", {"org": "beta", "next": "/console/memories/"})
    assert r.status_code == 302 and r["Location"] == "/console/memories/"
    assert node_ids_in(c.get("/console/memories/").content.decode()) == {mem.beta_org}
    # the API follows the same session org
    assert c.get("/api/v1/org").json()["slug"] == "beta"
    # an org the user is not in does not exist; an off-site "next" is ignored
    assert c.post("/console/org", {"org": "gamma"}).status_code == 404
    r = c.post("/console/org", {"org": "alpha", "next": "https://evil.example/"})
    assert r["Location"] == "/console/"
    # a stale org in the session (membership removed) falls back to the first org
    c.post("/console/org", {"org": "beta"})
    Membership.objects.filter(org=b.org, user=a.member).delete()
    assert mem.member_private in node_ids_in(c.get("/console/memories/").content.decode())


def test_feed_nodes_renders_only_visible_nodes(world, mem, login):
    ids = ",".join(str(i) for i in (mem.member_private, mem.owner_private, mem.beta_org, mem.owner_org))
    html = login(world["a"].member).get(f"/console/feed/nodes?ids={ids}&x=1").content.decode()
    assert node_ids_in(html) == {mem.member_private, mem.owner_org}
    assert login(world["a"].member).get("/console/feed/nodes?ids=a,b").status_code == 200
    rows = login(world["a"].member).get(f"/console/feed/nodes?ids={ids}&as=rows").content.decode()
    assert "node-row" in rows and node_ids_in(rows) == {mem.member_private, mem.owner_org}
    assert login(world["a"].member).get(f"/console/feed/nodes?ids={mem.beta_org}&as=rows").content == b""


def test_vendored_static_files_are_served(login):
    for path in ("frontend/vendor/htmx/htmx.min.js", "frontend/vendor/vis-network/vis-network.min.js",
                 "frontend/console.js", "frontend/console.css"):
        r = login(None).get(f"/static/{path}")
        assert r.status_code == 200, path
        b"".join(r.streaming_content)
    from django.test import Client

    r = Client(raise_request_exception=False).get("/static/../../nylon_project/settings.py")
    assert r.status_code in (400, 404)


def test_health_panel_shows_the_orgs_own_llm(world, login, settings):
    settings.NYLON_LLM_URL = ""  # the instance has none: the global state is "disabled"
    a = world["a"]
    a.org.settings = {"llm": {"url": "http://127.0.0.1:9/v1", "model": "org-own-model"}}
    a.org.save(update_fields=["settings"])
    html = login(a.member).get("/console/health").content.decode()
    row = html[html.index("<td>llm</td>"):].split("</tr>")[0]
    assert "org-own-model" in row and "status-disabled" not in row
    html = login(world["b"].member).get("/console/health").content.decode()  # another org: the instance's
    row = html[html.index("<td>llm</td>"):].split("</tr>")[0]
    assert "status-disabled" in row and "org-own-model" not in row
