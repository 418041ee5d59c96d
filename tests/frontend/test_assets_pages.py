"""The console's asset pages through the Django test client, as nobody, outsider, member, admin,
owner and another org: they show what the API would show, change things only through the asset
services (same rules, same audit entries), and refuse — audited, nothing half-written — what the
API refuses."""

from __future__ import annotations

import re

import pytest

from assets import services
from assets.models import AccessGrant, AgentBinding, Asset, AssetVersion, AuditEvent
from memory.models import Visibility
from teams.models import Agent, TeamMembership, TeamRole

from .conftest import actor, weave

pytestmark = pytest.mark.django_db


def asset_ids_in(html: str) -> set[int]:
    return {int(x) for x in re.findall(r'data-asset-id="(\d+)"', html)}


def make(user, org, *, title: str, body: str = "", visibility: str = Visibility.PRIVATE, kind: str = "wiki",
         team=None, **kw) -> Asset:
    return services.asset_create(actor=actor(user, org), kind=kind, title=title, body=body, visibility=visibility,
                                 team=team, **kw)


def denied(org, **filters) -> int:
    return AuditEvent.objects.filter(org=org, outcome="denied", **filters).count()


@pytest.fixture
def assets(world):
    """member: a private wiki page in two versions; owner: an org-wide skill; beta: an org asset."""
    a, b = world["a"], world["b"]
    runbook = make(a.member, a.org, title="Deploy runbook", summary="How we ship",
                   body="Step 1: build\nStep 2: test\nStep 3: ship")
    runbook, _ = services.asset_update(actor=actor(a.member, a.org), asset=runbook, expected_version=1,
                                       data={"body": "Step 1: build\nStep 2: test on staging\nStep 3: ship"})
    skill = make(a.owner, a.org, title="Escalation skill", kind="skill", visibility=Visibility.ORG,
                 body="Page the on-call engineer.")
    beta = make(b.owner, b.org, title="Beta handbook", visibility=Visibility.ORG, body="Beta only.")
    return {"runbook": runbook, "skill": skill, "beta": beta}


# --- who may open the pages -----------------------------------------------------------------------


@pytest.mark.parametrize("url", ["/console/assets/", "/console/assets/1/", "/console/assets/1/acl/"])
def test_anonymous_is_sent_to_login(url, login):
    r = login(None).get(url)
    assert r.status_code == 302 and r["Location"].startswith("/login/?next=")


def test_outsider_gets_no_org_page_and_nothing_is_written(world, assets, login):
    c = login(world["outsider"])
    skill = assets["skill"]
    for url in ("/console/assets/", f"/console/assets/{skill.id}/", f"/console/assets/{skill.id}/acl/"):
        r = c.get(url)
        assert r.status_code == 403 and "Escalation" not in r.content.decode(), url
    assert c.post(f"/console/assets/{skill.id}/", {"op": "transition", "to": "deprecated"}).status_code == 403
    assert c.post("/console/assets/", {"kind": "wiki", "title": "Sneaky", "visibility": "private"}).status_code == 403
    assert Asset.objects.get(id=skill.id).status == "draft" and not Asset.objects.filter(title="Sneaky").exists()


def test_nav_link_and_script_strings(world, login):
    html = login(world["a"].member).get("/console/").content.decode()
    assert 'href="/console/assets/"' in html.split("<main>")[0]
    catalog = re.search(r'<script id="console-i18n" type="application/json">(.*?)</script>', html).group(1)
    assert '"disconnected"' in catalog and '"graph_stats"' in catalog


# --- list -----------------------------------------------------------------------------------------


def test_list_shows_exactly_the_readable_assets(world, assets, login):
    a, b = world["a"], world["b"]
    runbook, skill, beta = assets["runbook"].id, assets["skill"].id, assets["beta"].id
    assert asset_ids_in(login(a.member).get("/console/assets/").content.decode()) == {runbook, skill}
    # org admins and owners are refused private assets of others, as in the API
    assert asset_ids_in(login(a.admin).get("/console/assets/").content.decode()) == {skill}
    assert asset_ids_in(login(a.owner).get("/console/assets/").content.decode()) == {skill}
    html = login(b.member).get("/console/assets/").content.decode()
    assert asset_ids_in(html) == {beta} and "Deploy runbook" not in html
    # the API's list agrees with the console's
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_login(a.member)
    assert {x["id"] for x in api.get("/api/v1/assets").json()["results"]} == {runbook, skill}


@pytest.mark.parametrize("query,expected", [
    ("kind=skill", {"skill"}),
    ("kind=wiki", {"runbook"}),
    ("kind=persona", set()),
    ("status=draft", {"runbook", "skill"}),
    ("status=approved", set()),
    ("visibility=private", {"runbook"}),
    ("visibility=org", {"skill"}),
    ("owner=me", {"runbook"}),
    ("q=runbook", {"runbook"}),
    ("q=ship", {"runbook"}),  # the summary
    ("q=ESCALATION", {"skill"}),
])
def test_list_filters(query, expected, world, assets, login):
    html = login(world["a"].member).get(f"/console/assets/?{query}").content.decode()
    assert asset_ids_in(html) == {assets[name].id for name in expected}


def test_list_team_filter_and_bad_filters(world, assets, login):
    a, b = world["a"], world["b"]
    c = login(a.member)
    team_asset = make(a.admin, a.org, title="Team notes", visibility=Visibility.ORG, team=a.team)
    assert asset_ids_in(c.get(f"/console/assets/?team={a.team.id}").content.decode()) == {team_asset.id}
    for bad in ("kind=nope", "status=live", "visibility=public", f"team={b.team.id}", "after=-1"):
        r = c.get(f"/console/assets/?{bad}")
        assert r.status_code == 400 and not asset_ids_in(r.content.decode()), bad


def test_list_keyset_pages(world, login):
    a = world["a"]
    ids = [make(a.member, a.org, title=f"Page {i}").id for i in range(120)]
    c = login(a.member)
    seen: list[int] = []
    url = "/console/assets/"
    while url:
        html = c.get(url).content.decode()
        seen += sorted(asset_ids_in(html), reverse=True)
        m = re.search(r'href="\?([^"]*after=\d+[^"]*)" id="asset-next"', html)
        url = "/console/assets/?" + m.group(1).replace("&amp;", "&") if m else None
    assert seen == sorted(ids, reverse=True)
    r = c.get(f"/console/assets/?after={ids[60]}&partial=rows", HTTP_HX_REQUEST="true")
    assert "<html" not in r.content.decode() and asset_ids_in(r.content.decode()) == set(ids[10:60])


# --- create ---------------------------------------------------------------------------------------


def test_create_through_the_service_rules(world, login):
    a = world["a"]
    c = login(a.member)
    r = c.post("/console/assets/", {"kind": "wiki", "title": "Onboarding", "body": "Hello", "visibility": "private"})
    asset = Asset.objects.get(org=a.org, title="Onboarding")
    assert r.status_code == 302 and r["Location"] == f"/console/assets/{asset.id}/"
    assert asset.owner_user_id == a.member.id and AssetVersion.objects.filter(asset=asset).count() == 1
    assert AuditEvent.objects.filter(org=a.org, action="asset.create", object_id=str(asset.id)).exists()
    # a member may not create an org-wide asset directly (create private, then promote)
    r = c.post("/console/assets/", {"kind": "wiki", "title": "Org page", "visibility": "org"})
    assert r.status_code == 400 and not Asset.objects.filter(title="Org page").exists()
    assert "promote it to the org" in r.content.decode()
    # a chat-memory asset may only hold memories its writer can read
    mine = weave(actor(a.member, a.org), "Ana chose the blue logo.")[0]
    theirs = weave(actor(a.owner, a.org), "Owner secret.", visibility=Visibility.PRIVATE)[0]
    c.post("/console/assets/", {"kind": "chat_memory", "title": "Leak", "node_ids": f"{mine} {theirs}",
                                "visibility": "private"})
    assert not Asset.objects.filter(title="Leak").exists()
    c.post("/console/assets/", {"kind": "chat_memory", "title": "Logo", "node_ids": str(mine), "visibility": "private"})
    logo = Asset.objects.get(title="Logo")
    assert logo.node_ids == [mine] and "blue logo" in c.get(f"/console/assets/{logo.id}/").content.decode()


# --- detail, versions, diff -----------------------------------------------------------------------


def test_detail_shows_content_versions_and_diff(world, assets, login):
    a = world["a"]
    runbook = assets["runbook"]
    r = login(a.member).get(f"/console/assets/{runbook.id}/")
    assert r.status_code == 200
    html = r.content.decode()
    assert "Step 2: test on staging" in html and 'data-version="1"' in html and 'data-version="2"' in html
    # default diff: the previous version against the current, side by side
    split = html.split('id="diff-split"')[1].split("</table>")[0]
    assert re.search(r'class="d-replace">.*Step 2: test</td>.*Step 2: test on staging</td>', split, re.S)
    assert 'class="d-equal"' in split and "Step 1: build" in split
    unified = login(a.member).get(f"/console/assets/{runbook.id}/?from=1&to=2&view=unified").content.decode()
    block = unified.split('id="diff-unified"')[1].split("</pre>")[0]
    assert '<span class="d-del">-Step 2: test</span>' in block
    assert '<span class="d-add">+Step 2: test on staging</span>' in block
    # each read by id is audited like the API's
    assert AuditEvent.objects.filter(org=a.org, action="asset.read", object_id=str(runbook.id),
                                     outcome="allowed").exists()
    # a pair that does not exist shows no diff, and no error
    r = login(a.member).get(f"/console/assets/{runbook.id}/?from=1&to=9")
    assert r.status_code == 200 and 'id="diff-split"' not in r.content.decode()


def test_diff_and_content_are_escaped(world, login):
    a = world["a"]
    asset = make(a.member, a.org, title="<b>bold</b> title", body="plain")
    services.asset_update(actor=actor(a.member, a.org), asset=asset, expected_version=1,
                          data={"body": "plain\n<script>alert('x')</script>"})
    for view in ("split", "unified"):
        html = login(a.member).get(f"/console/assets/{asset.id}/?view={view}").content.decode()
        assert "<script>alert" not in html and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
        assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html


def test_detail_is_404_for_hidden_and_foreign_assets_and_audited(world, assets, login):
    a, b = world["a"], world["b"]
    runbook = assets["runbook"]
    before = denied(a.org, action="asset.read", object_id=str(runbook.id))
    for who in (a.admin, a.owner):  # admins and owners do not read a member's private asset
        assert login(who).get(f"/console/assets/{runbook.id}/").status_code == 404
    assert denied(a.org, action="asset.read", object_id=str(runbook.id)) == before + 2
    assert login(b.owner).get(f"/console/assets/{runbook.id}/").status_code == 404
    assert login(a.member).get(f"/console/assets/{assets['beta'].id}/").status_code == 404
    assert login(a.member).get("/console/assets/999999999/").status_code == 404


# --- edit -----------------------------------------------------------------------------------------


def test_edit_creates_a_version_and_stale_edits_are_kept_not_saved(world, assets, login):
    a = world["a"]
    runbook = assets["runbook"]
    c = login(a.member)
    r = c.post(f"/console/assets/{runbook.id}/", {"op": "edit", "expected_version": 2, "title": "Deploy runbook",
                                                  "summary": "How we ship", "body": "Step 1: build it"})
    assert r.status_code == 302
    runbook.refresh_from_db()
    assert runbook.version == 3 and runbook.body == "Step 1: build it"
    ev = AuditEvent.objects.filter(org=a.org, action="asset.update", object_id=str(runbook.id)).order_by("-id")[0]
    assert ev.detail["version"] == 3 and ev.detail["new_version"] is True
    # the same content again: no new version
    c.post(f"/console/assets/{runbook.id}/", {"op": "edit", "expected_version": 3, "title": "Deploy runbook",
                                              "summary": "How we ship", "body": "Step 1: build it"})
    assert Asset.objects.get(id=runbook.id).version == 3
    # a stale expected_version: 409, the typed text is still in the form, nothing saved
    r = c.post(f"/console/assets/{runbook.id}/", {"op": "edit", "expected_version": 2, "title": "Deploy runbook",
                                                  "body": "Typed against an old version"})
    assert r.status_code == 409
    html = r.content.decode()
    assert "Stale version" in html and "Typed against an old version" in html
    assert re.search(r'name="expected_version" value="3"', html)
    assert Asset.objects.get(id=runbook.id).body == "Step 1: build it"
    assert AssetVersion.objects.filter(asset=runbook).count() == 3


def test_edit_refusals_are_audited_and_change_nothing(world, assets, login):
    a, b = world["a"], world["b"]
    skill, runbook = assets["skill"], assets["runbook"]
    body = {"op": "edit", "expected_version": 1, "title": "Hijacked", "body": "x"}
    before = denied(a.org, action="asset.write", object_id=str(skill.id))
    r = login(a.member).post(f"/console/assets/{skill.id}/", body)  # readable, not writable
    assert r.status_code == 403
    assert denied(a.org, action="asset.write", object_id=str(skill.id)) == before + 1
    assert login(a.admin).post(f"/console/assets/{runbook.id}/", body).status_code == 404
    assert login(b.owner).post(f"/console/assets/{skill.id}/", body).status_code == 404
    assert not Asset.objects.filter(title="Hijacked").exists()
    assert AssetVersion.objects.filter(asset=skill).count() == 1
    # the member sees no edit form on an asset it cannot change
    assert 'id="asset-edit"' not in login(a.member).get(f"/console/assets/{skill.id}/").content.decode()
    assert 'id="asset-edit"' in login(a.owner).get(f"/console/assets/{skill.id}/").content.decode()


# --- lifecycle ------------------------------------------------------------------------------------


def _to(client, asset_id, to, version=None):
    data = {"op": "transition", "to": to}
    if version is not None:
        data["expected_version"] = version
    return client.post(f"/console/assets/{asset_id}/", data)


def test_personal_lifecycle_through_the_state_machine(world, assets, login):
    a = world["a"]
    runbook = assets["runbook"]
    c = login(a.member)
    html = c.get(f"/console/assets/{runbook.id}/").content.decode()
    assert 'id="transition-candidate"' in html and 'id="transition-approved"' not in html
    assert _to(c, runbook.id, "approved").status_code == 302  # draft → approved is illegal: a message
    assert Asset.objects.get(id=runbook.id).status == "draft"
    assert "Illegal transition" in c.get(f"/console/assets/{runbook.id}/").content.decode()
    for to in ("candidate", "approved", "deprecated", "archived"):
        assert _to(c, runbook.id, to, version=2).status_code == 302
        assert Asset.objects.get(id=runbook.id).status == to
    events = AuditEvent.objects.filter(org=a.org, action="asset.transition", object_id=str(runbook.id)).order_by("id")
    assert [(e.detail["from"], e.detail["to"]) for e in events] == [
        ("draft", "candidate"), ("candidate", "approved"), ("approved", "deprecated"), ("deprecated", "archived")]
    assert Asset.objects.get(id=runbook.id).approved_by_id == a.member.id
    html = c.get(f"/console/assets/{runbook.id}/").content.decode()
    assert 'id="transition-' not in html and 'id="asset-edit"' not in html  # archived: terminal, read-only


def test_stale_transition_is_refused(world, assets, login):
    c = login(world["a"].member)
    runbook = assets["runbook"]
    r = _to(c, runbook.id, "candidate", version=1)
    assert r.status_code == 302 and Asset.objects.get(id=runbook.id).status == "draft"
    assert "Stale version" in c.get(r["Location"]).content.decode()


def test_lifecycle_refusals_are_audited(world, assets, login):
    a, b = world["a"], world["b"]
    skill = assets["skill"]
    before = denied(a.org)
    assert _to(login(a.member), skill.id, "candidate").status_code == 403
    assert denied(a.org) == before + 1
    assert _to(login(b.owner), skill.id, "candidate").status_code == 404
    assert Asset.objects.get(id=skill.id).status == "draft"
    assert not AuditEvent.objects.filter(org=a.org, action="asset.transition", object_id=str(skill.id)).exists()


def test_promotion_to_team_is_approved_by_an_admin_of_the_scope(world, assets, login):
    a = world["a"]
    runbook = assets["runbook"]
    member, admin = login(a.member), login(a.admin)
    r = member.post(f"/console/assets/{runbook.id}/", {"op": "visibility", "visibility": "team", "team": a.team.id,
                                                        "expected_version": 2})
    assert r.status_code == 302
    runbook.refresh_from_db()
    assert runbook.status == "candidate" and runbook.visibility == "private"
    assert runbook.promotion["visibility"] == "team" and runbook.promotion["team_id"] == a.team.id
    assert AuditEvent.objects.filter(org=a.org, action="asset.promote", object_id=str(runbook.id)).exists()
    # the owner is not a team admin: no approve button, and the POST is refused (audited)
    assert 'id="transition-approved"' not in member.get(f"/console/assets/{runbook.id}/").content.decode()
    before = denied(a.org, action="asset.write", object_id=str(runbook.id))
    assert _to(member, runbook.id, "approved").status_code == 403
    assert denied(a.org, action="asset.write", object_id=str(runbook.id)) == before + 1
    # approvers may read the candidate (the org owner is one), other members may not
    assert login(a.owner).get(f"/console/assets/{runbook.id}/").status_code == 200
    # the org admin approves from its queue
    queue = admin.get("/console/assets/").content.decode()
    assert re.search(rf'id="awaiting-approval".*href="/console/assets/{runbook.id}/"', queue, re.S)
    html = admin.get(f"/console/assets/{runbook.id}/").content.decode()
    assert 'id="transition-approved"' in html and 'id="transition-draft"' in html
    assert _to(admin, runbook.id, "approved", version=2).status_code == 302
    runbook.refresh_from_db()
    assert (runbook.status, runbook.visibility, runbook.team_id, runbook.approved_by_id) == (
        "approved", "team", a.team.id, a.admin.id)
    ev = AuditEvent.objects.filter(org=a.org, action="asset.transition", object_id=str(runbook.id)).latest("id")
    assert ev.detail["approver"] == f"user:{a.admin.username}" and ev.detail["promotion"]["visibility"] == "team"


def test_team_admin_approves_and_rejects(world, login):
    a = world["a"]
    TeamMembership.objects.filter(team=a.team, user=a.member).update(role=TeamRole.ADMIN)
    TeamMembership.objects.create(org=a.org, team=a.team, user=a.owner, role=TeamRole.MEMBER)
    asset = make(a.owner, a.org, title="Owner proposal")
    services.asset_promote(actor=actor(a.owner, a.org), asset=asset, visibility="team", team=a.team)
    lead = login(a.member)
    assert f'href="/console/assets/{asset.id}/"' in lead.get("/console/assets/").content.decode()
    assert _to(lead, asset.id, "draft").status_code == 302  # rejected back to draft
    asset.refresh_from_db()
    assert asset.status == "draft" and asset.promotion == {} and asset.visibility == "private"
    ev = AuditEvent.objects.filter(org=a.org, action="asset.transition", object_id=str(asset.id)).latest("id")
    assert ev.detail["rejected_promotion"]["visibility"] == "team"
    # org-wide promotion needs an org admin: the team admin is no approver (and may not even read it)
    services.asset_promote(actor=actor(a.owner, a.org), asset=asset, visibility="org", team=None)
    assert _to(lead, asset.id, "approved").status_code == 404
    assert Asset.objects.get(id=asset.id).status == "candidate"


# --- visibility and ACL ---------------------------------------------------------------------------


def test_restrict_and_grant_then_the_grantee_reads_it(world, assets, login):
    a = world["a"]
    skill = assets["skill"]
    owner, member = login(a.owner), login(a.member)
    assert member.get(f"/console/assets/{skill.id}/").status_code == 200
    r = owner.post(f"/console/assets/{skill.id}/", {"op": "visibility", "visibility": "restricted",
                                                     "expected_version": 1})
    assert r.status_code == 302 and Asset.objects.get(id=skill.id).visibility == "restricted"
    ev = AuditEvent.objects.filter(org=a.org, action="asset.update", object_id=str(skill.id)).latest("id")
    assert ev.detail["visibility"] == ["org", "restricted"]
    assert member.get(f"/console/assets/{skill.id}/").status_code == 404
    assert skill.id not in asset_ids_in(member.get("/console/assets/").content.decode())
    assert 'id="acl-link"' in owner.get(f"/console/assets/{skill.id}/").content.decode()
    acl = owner.get(f"/console/assets/{skill.id}/acl/")
    assert acl.status_code == 200 and 'id="no-grants"' in acl.content.decode()
    assert f'value="user:{a.member.id}"' in acl.content.decode()
    r = owner.post(f"/console/assets/{skill.id}/acl/", {"op": "grant", "grantee": f"user:{a.member.id}",
                                                        "permission": "read"})
    assert r.status_code == 302
    assert f"Access granted to user:{a.member.username}." in owner.get(r["Location"]).content.decode()
    grant = AccessGrant.objects.get(object_type="asset", object_id=skill.id)
    assert grant.grantee_user_id == a.member.id and grant.permission == "read"
    ev = AuditEvent.objects.filter(org=a.org, action="acl.grant", object_id=str(skill.id)).latest("id")
    assert ev.reason == "owner" and ev.detail["grantee"] == f"user:{a.member.id}"
    assert member.get(f"/console/assets/{skill.id}/").status_code == 200
    assert skill.id in asset_ids_in(member.get("/console/assets/").content.decode())
    # a team-role grant and a duplicate
    owner.post(f"/console/assets/{skill.id}/acl/", {"op": "grant", "grantee": f"team:{a.team.id}:member",
                                                    "permission": "write"})
    r = owner.post(f"/console/assets/{skill.id}/acl/", {"op": "grant", "grantee": f"user:{a.member.id}",
                                                        "permission": "write"})
    assert r.status_code == 302 and "already has a grant" in owner.get(r["Location"]).content.decode()
    assert AccessGrant.objects.filter(object_type="asset", object_id=skill.id).count() == 2
    # revoke the member's own grant: still readable through the team grant; revoke both: gone
    owner.post(f"/console/assets/{skill.id}/acl/", {"op": "revoke", "grant_id": grant.id})
    assert member.get(f"/console/assets/{skill.id}/").status_code == 200
    team_grant = AccessGrant.objects.get(object_type="asset", object_id=skill.id)
    owner.post(f"/console/assets/{skill.id}/acl/", {"op": "revoke", "grant_id": team_grant.id})
    assert member.get(f"/console/assets/{skill.id}/").status_code == 404
    assert AuditEvent.objects.filter(org=a.org, action="acl.revoke", object_id=str(skill.id)).count() == 2


def test_acl_refusals(world, assets, login):
    a, b = world["a"], world["b"]
    skill, runbook = assets["skill"], assets["runbook"]
    owner_actor = actor(a.owner, a.org)
    services.asset_update(actor=owner_actor, asset=skill, data={"visibility": "restricted"}, expected_version=1)
    obj, reason = services.acl_object_for_admin(owner_actor, "asset", skill.id)
    services.grant_create(actor=owner_actor, obj=obj, object_type="asset", reason=reason, grantee_kind="user",
                          user_id=a.member.id, permission="write")
    member = login(a.member)
    # a grantee (even a writer) is not the ACL's admin: 403, audited by the access module
    before = denied(a.org, action="asset_acl.write", object_id=str(skill.id))
    assert member.get(f"/console/assets/{skill.id}/acl/").status_code == 403
    r = member.post(f"/console/assets/{skill.id}/acl/", {"op": "grant", "grantee": f"user:{a.admin.id}"})
    assert r.status_code == 403
    assert denied(a.org, action="asset_acl.write", object_id=str(skill.id)) == before + 2
    assert AccessGrant.objects.filter(object_type="asset", object_id=skill.id).count() == 1
    # other org: not found; a private asset of someone else: not found, for admins too
    assert login(b.owner).get(f"/console/assets/{skill.id}/acl/").status_code == 404
    assert login(a.admin).get(f"/console/assets/{runbook.id}/acl/").status_code == 404
    # another org's user cannot be granted
    r = login(a.owner).post(f"/console/assets/{skill.id}/acl/", {"op": "grant", "grantee": f"user:{b.member.id}"})
    assert r.status_code == 302 and not AccessGrant.objects.filter(grantee_user=b.member).exists()
    # a grant of another object is not revoked through this page
    other = make(a.owner, a.org, title="Other", visibility=Visibility.RESTRICTED)
    o, rs = services.acl_object_for_admin(owner_actor, "asset", other.id)
    g = services.grant_create(actor=owner_actor, obj=o, object_type="asset", reason=rs, grantee_kind="user",
                              user_id=a.admin.id)
    assert login(a.owner).post(f"/console/assets/{skill.id}/acl/", {"op": "revoke", "grant_id": g.id}).status_code == 404
    assert AccessGrant.objects.filter(id=g.id).exists()
    # no ACL for a non-restricted asset: back to the asset with the reason
    r = member.get(f"/console/assets/{runbook.id}/acl/")
    assert r.status_code == 302 and r["Location"] == f"/console/assets/{runbook.id}/"
    assert "Only restricted objects" in member.get(r["Location"]).content.decode()


def test_org_admin_self_grant_is_audited(world, assets, login):
    a = world["a"]
    skill = assets["skill"]
    services.asset_update(actor=actor(a.owner, a.org), asset=skill, data={"visibility": "restricted"},
                          expected_version=1)
    admin = login(a.admin)
    assert admin.get(f"/console/assets/{skill.id}/").status_code == 404
    html = admin.get(f"/console/assets/{skill.id}/acl/").content.decode()
    assert 'id="acl-admin-note"' in html and "Escalation skill" not in html  # named by id only
    admin.post(f"/console/assets/{skill.id}/acl/", {"op": "grant", "grantee": f"user:{a.admin.id}"})
    ev = AuditEvent.objects.filter(org=a.org, action="acl.grant", object_id=str(skill.id)).latest("id")
    assert ev.reason == "org_admin" and ev.detail["self_grant"] is True
    assert admin.get(f"/console/assets/{skill.id}/").status_code == 200


def test_only_the_owner_changes_visibility(world, assets, login):
    a = world["a"]
    skill = assets["skill"]
    admin = login(a.admin)  # may write the org asset, but its visibility is the owner's
    html = admin.get(f"/console/assets/{skill.id}/").content.decode()
    assert 'id="visibility-form"' not in html
    before = denied(a.org, action="post.console.asset_detail", object_id=str(skill.id))
    r = admin.post(f"/console/assets/{skill.id}/", {"op": "visibility", "visibility": "private",
                                                     "expected_version": 1})
    assert r.status_code == 403
    assert denied(a.org, action="post.console.asset_detail", object_id=str(skill.id)) == before + 1
    skill.refresh_from_db()
    assert skill.visibility == "org" and skill.version == 1
    # widening straight to org is a promotion, never an edit
    member = login(a.member)
    runbook = assets["runbook"]
    member.post(f"/console/assets/{runbook.id}/", {"op": "visibility", "visibility": "org", "expected_version": 2})
    runbook.refresh_from_db()
    assert runbook.visibility == "private" and runbook.status == "candidate"


# --- bindings -------------------------------------------------------------------------------------


def test_bindings_add_update_remove(world, assets, login):
    a = world["a"]
    skill = assets["skill"]
    admin = login(a.admin)
    html = admin.get(f"/console/assets/{skill.id}/").content.decode()
    assert 'id="binding-add"' in html and f'<option value="{a.agent.id}"' in html
    r = admin.post(f"/console/assets/{skill.id}/", {"op": "bind", "agent": a.agent.id, "mode": "index",
                                                     "priority": 5})
    assert r.status_code == 302
    b = AgentBinding.objects.get(agent=a.agent, asset=skill)
    assert (b.mode, b.priority) == ("index", 5)
    admin.post(f"/console/assets/{skill.id}/", {"op": "bind", "agent": a.agent.id, "mode": "tool", "priority": 1})
    assert AgentBinding.objects.get(agent=a.agent, asset=skill).mode == "tool"
    assert AuditEvent.objects.filter(org=a.org, action="binding.set", object_id=str(a.agent.id)).count() == 2
    html = admin.get(f"/console/assets/{skill.id}/").content.decode()
    assert f'data-binding-id="{b.id}"' in html
    # the agent now reads the asset through the API
    from rest_framework.test import APIClient

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {a.key}")
    # a draft serves nothing to its agent; once approved, the agent reads the approved version
    assert api.get(f"/api/v1/assets/{skill.id}").status_code == 404
    Asset.objects.filter(id=skill.id).update(status="approved", approved_version=1)
    assert api.get(f"/api/v1/assets/{skill.id}").status_code == 200
    r = admin.post(f"/console/assets/{skill.id}/", {"op": "unbind", "binding_id": b.id})
    assert r.status_code == 302 and not AgentBinding.objects.filter(id=b.id).exists()
    assert AuditEvent.objects.filter(org=a.org, action="binding.remove", object_id=str(a.agent.id)).exists()
    assert api.get(f"/api/v1/assets/{skill.id}").status_code == 404


def test_binding_refusals(world, assets, login):
    a, b = world["a"], world["b"]
    skill = assets["skill"]
    member = login(a.member)
    assert 'id="binding-add"' not in member.get(f"/console/assets/{skill.id}/").content.decode()
    before = denied(a.org, action="post.console.asset_detail")
    r = member.post(f"/console/assets/{skill.id}/", {"op": "bind", "agent": a.agent.id, "mode": "full",
                                                      "priority": 1})
    assert r.status_code == 403 and denied(a.org, action="post.console.asset_detail") == before + 1
    assert not AgentBinding.objects.exists()
    admin = login(a.admin)
    # another org's agent does not exist here
    assert admin.post(f"/console/assets/{skill.id}/", {"op": "bind", "agent": b.agent.id, "mode": "full",
                                                        "priority": 1}).status_code == 404
    # a binding never widens visibility: a team asset of another team is refused (a message, nothing bound)
    other_team_agent = Agent.objects.create(org=a.org, name="lonely-bot")
    team_asset = make(a.admin, a.org, title="Core only", visibility=Visibility.ORG)
    services.asset_update(actor=actor(a.admin, a.org), asset=team_asset, data={"visibility": "restricted"},
                          expected_version=1)
    o, rs = services.acl_object_for_admin(actor(a.admin, a.org), "asset", team_asset.id)
    services.grant_create(actor=actor(a.admin, a.org), obj=o, object_type="asset", reason=rs,
                          grantee_kind="team_role", team_id=a.team.id, team_role="member")
    r = admin.post(f"/console/assets/{team_asset.id}/", {"op": "bind", "agent": other_team_agent.id, "mode": "full",
                                                          "priority": 1})
    # on the binding form, in words: not the API's field name
    assert r.status_code == 400
    form = re.search(r'<form method="post" class="form inline-form" id="binding-add">.*?</form>',
                     r.content.decode(), re.S).group(0)
    assert "never widen" in form and "asset_id" not in r.content.decode()
    assert not AgentBinding.objects.exists()
    # a member cannot remove an admin's binding
    services.binding_set(actor=actor(a.admin, a.org), agent=a.agent, asset=skill, mode="full", priority=1)
    bid = AgentBinding.objects.get().id
    assert member.post(f"/console/assets/{skill.id}/", {"op": "unbind", "binding_id": bid}).status_code == 403
    assert login(b.owner).post(f"/console/assets/{skill.id}/", {"op": "unbind", "binding_id": bid}).status_code == 404
    assert AgentBinding.objects.filter(id=bid).exists()
    # the binding of another asset is not removed through this one
    runbook_admin = make(a.admin, a.org, title="Admin org page", visibility=Visibility.ORG)
    assert admin.post(f"/console/assets/{runbook_admin.id}/", {"op": "unbind", "binding_id": bid}).status_code == 404
    assert AgentBinding.objects.filter(id=bid).exists()


def test_unknown_op_changes_nothing(world, assets, login):
    c = login(world["a"].member)
    runbook = assets["runbook"]
    r = c.post(f"/console/assets/{runbook.id}/", {"op": "explode"})
    assert r.status_code == 302 and "Unknown action" in c.get(r["Location"]).content.decode()
    assert Asset.objects.get(id=runbook.id).version == 2


def test_invalid_forms_rerender_with_errors_and_write_nothing(world, assets, login):
    a = world["a"]
    runbook, skill = assets["runbook"], assets["skill"]
    r = login(a.member).post(f"/console/assets/{runbook.id}/", {"op": "edit", "expected_version": 2, "title": ""})
    assert r.status_code == 400 and 'id="asset-edit" open' in r.content.decode()
    r = login(a.admin).post(f"/console/assets/{skill.id}/", {"op": "bind", "agent": a.agent.id, "mode": "full",
                                                              "priority": -1})
    assert r.status_code == 400 and "greater than or equal to 0" in r.content.decode()
    r = login(a.owner).post(f"/console/assets/{skill.id}/", {"op": "visibility", "visibility": "public",
                                                              "expected_version": 1})
    assert r.status_code == 400
    assert Asset.objects.get(id=runbook.id).version == 2 and not AgentBinding.objects.exists()
    assert Asset.objects.get(id=skill.id).visibility == "org"
