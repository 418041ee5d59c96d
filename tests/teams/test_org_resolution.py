"""Which org a session user acts in (teams.auth.resolve_user_org), through the API.

The takeover this guards against: an admin of an older org adds a member of another org by email;
"the org with the lowest id" then became that member's current org in the sessions they already
had open, and their next write landed in the admin's org. Adding is now an invitation the user
accepts (in one browser session); their other sessions keep their org all the same."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from memory.models import Node
from teams.models import Membership, Role
from teams.services import organization_create

from .invites import accept, invite

pytestmark = pytest.mark.django_db

SESSION_ORG_KEY = "org_slug"  # teams.auth.SESSION_ORG_KEY, spelled out so the tests
# also run against code without it: the key the switcher writes

WEAVE = {"session_key": "mine-1", "turns": [{"speaker": "Bea", "text": "Our beta launch is on May 2."}]}


def _org_slug(client, **headers) -> str:
    r = client.get("/api/v1/org", **headers)
    assert r.status_code == 200, r.content
    return r.json()["slug"]


def test_admin_of_older_org_adding_a_member_does_not_move_their_session(world, client_for):
    a, b = world["a"], world["b"]
    assert a.org.id < b.org.id  # alpha is the org the old "lowest id" rule picked
    victim = client_for(b.member)
    assert _org_slug(victim) == "beta"

    r = client_for(a.admin).post("/api/v1/members", {"email": "Beta-Member@example.com"}, format="json")
    assert r.status_code == 201
    # Only what the admin typed and the invitation: not the account's username.
    assert set(r.json()) == {"id", "email", "role", "status", "created_at", "expires_at", "invite_url", "emailed"}
    assert r.json()["email"] == "Beta-Member@example.com"
    assert "username" not in r.content.decode() and '"beta-member"' not in r.content.decode()
    assert not Membership.objects.filter(org=a.org, user=b.member).exists()  # not before accepting
    accept(b.member, r.json()["invite_url"])  # in another browser session
    assert Membership.objects.filter(org=a.org, user=b.member).exists()

    # The open session stays in beta, and its next write is stored in beta.
    assert _org_slug(victim) == "beta"
    w = victim.post("/api/v1/memories/weave-session", WEAVE, format="json")
    assert w.status_code in (200, 201), w.content
    assert set(Node.objects.filter(id__in=w.json()["node_ids"]).values_list("org_id", flat=True)) == {b.org.id}

    # A new session (a fresh login) starts in beta too: the membership an admin added is newer.
    assert _org_slug(client_for(b.member)) == "beta"

    # Alpha is theirs to choose: per request with X-Nylon-Org, which does not move the session.
    assert _org_slug(victim, HTTP_X_NYLON_ORG="alpha") == "alpha"
    assert _org_slug(victim) == "beta"
    # Or in the console's switcher, which the API then follows.
    assert victim.post("/console/org", {"org": "alpha"}).status_code == 302
    assert _org_slug(victim) == "alpha"


def test_org_choice_is_pinned_by_the_first_request(world, client_for):
    a, b = world["a"], world["b"]
    c = client_for(b.owner)
    assert c.session.get(SESSION_ORG_KEY) is None
    assert _org_slug(c) == "beta"
    assert c.session[SESSION_ORG_KEY] == "beta"
    # Joining an older org (even as its owner) does not change the pinned org.
    Membership.objects.create(org=a.org, user=b.owner, role=Role.OWNER)
    assert _org_slug(c) == "beta"


def test_header_naming_a_foreign_org_is_404_for_member_and_outsider(world, client_for):
    for who in (world["b"].member, world["outsider"]):
        r = client_for(who).get("/api/v1/org", HTTP_X_NYLON_ORG="alpha")
        assert r.status_code == 404
    assert client_for(world["outsider"]).get("/api/v1/org").status_code == 403


def test_removed_from_chosen_org_falls_back_to_remaining_org(world, client_for):
    a, b = world["a"], world["b"]
    accept(a.member, invite(client_for(b.owner), a.member.email)["invite_url"])
    c = client_for(a.member)
    assert c.post("/console/org", {"org": "beta"}).status_code == 302
    assert _org_slug(c) == "beta"

    assert client_for(b.owner).delete(f"/api/v1/members/{a.member.id}").status_code == 204

    # Not "No such organisation" on every call until a console page is opened: the stale choice
    # is dropped and the remaining org is used (and pinned).
    assert c.get("/api/schema/").status_code == 200
    assert _org_slug(c) == "alpha"
    assert c.session[SESSION_ORG_KEY] == "alpha"
    assert c.get("/api/v1/members").status_code == 200


def test_stale_choice_with_several_orgs_left_takes_the_oldest_membership(world, client_for):
    a, b = world["a"], world["b"]
    # beta's member joins gamma by choice, and alpha's admin adds them to alpha (lower org id) later.
    gamma = organization_create(name="Gamma", slug="gamma", owner=get_user_model().objects.create_user("g"))
    Membership.objects.create(org=gamma, user=b.member, role=Role.MEMBER)
    accept(b.member, invite(client_for(a.admin), b.member.email)["invite_url"])
    c = client_for(b.member)
    assert c.post("/console/org", {"org": "gamma"}).status_code == 302
    assert _org_slug(c) == "gamma"
    Membership.objects.filter(org=gamma, user=b.member).delete()
    # Their oldest membership, never the org that added them last (the lowest id would be alpha).
    assert _org_slug(c) == "beta"


def test_removed_from_every_org_is_403_and_the_choice_is_dropped(world, client_for):
    a = world["a"]
    c = client_for(a.member)
    assert _org_slug(c) == "alpha"
    assert client_for(a.admin).delete(f"/api/v1/members/{a.member.id}").status_code == 204
    assert c.get("/api/v1/org").status_code == 403
    assert SESSION_ORG_KEY not in c.session
