"""A console page says which org it was rendered for (<meta name="nylon-org">, sent back as the
form field ``nylon_org`` and the htmx header ``X-Nylon-Page-Org``); a state-changing request from a page
of another org than the session's current one (the org switched since in another tab) is refused
with a 409 and writes nothing. A matching marker, or none (a client without the console's script),
acts as before; the org switch itself is never refused."""

from __future__ import annotations

import pytest

from teams.models import Agent, ApiKey, Invitation, Membership, Team

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}



def _on_beta(login, user):
    c = login(user)
    assert c.post("/console/org", {"org": "beta", "next": "/console/"}).status_code == 302
    return c


def _refused(r, *, fragment: bool = False):
    assert r.status_code == 409
    text = r.content.decode()
    assert "This page was for organisation ALPHA; you have since switched to BETA in another tab." in text
    assert ("<html" not in text) if fragment else ("Reload the page" in text)


def test_a_page_names_its_org(two_orgs, login):
    c = _on_beta(login, two_orgs["a"].owner)
    text = c.get("/console/teams/").content.decode()
    assert '<meta name="nylon-org" content="beta">' in text
    assert '"X-Nylon-Page-Org": "beta"' in text  # the htmx header, on <body hx-headers>


@pytest.mark.parametrize("marker", [{"nylon_org": "alpha"}, {"HTTP_X_NYLON_PAGE_ORG": "alpha"}])
def test_owner_create_team_from_a_stale_page_is_refused(two_orgs, login, marker):
    c = _on_beta(login, two_orgs["a"].owner)
    data = {"name": "Stale", **{k: v for k, v in marker.items() if not k.startswith("HTTP_")}}
    headers = {k: v for k, v in marker.items() if k.startswith("HTTP_")}
    _refused(c.post("/console/teams/", data, **headers))
    assert not Team.objects.filter(name="Stale").exists()


def test_owner_htmx_request_from_a_stale_page_gets_a_409_fragment(two_orgs, login):
    c = _on_beta(login, two_orgs["a"].owner)
    _refused(c.post("/console/teams/", {"name": "Stale"}, HTTP_X_NYLON_PAGE_ORG="alpha", **HX), fragment=True)
    assert not Team.objects.filter(name="Stale").exists()


def test_owner_every_kind_of_change_from_a_stale_page_is_refused(two_orgs, login):
    a, b = two_orgs["a"], two_orgs["b"]
    c = _on_beta(login, a.owner)
    stale = {"nylon_org": "alpha"}
    invitations, agents = Invitation.objects.count(), Agent.objects.count()
    _refused(c.post("/console/members/", {"email": "boss@example.com", "role": "owner", **stale}))
    _refused(c.post("/console/agents/", {"name": "stale-bot", "default_visibility": "org", **stale}))
    # Alpha's Members page removes a.member, who is in beta too: a user id names them in both orgs.
    _refused(c.post(f"/console/members/{a.member.id}", {"op": "remove", **stale}))
    _refused(c.post(f"/console/members/{a.member.id}", {"role": "admin", **stale}))
    key = ApiKey.objects.filter(agent=b.agent).first()
    _refused(c.post(f"/console/keys/{key.id}/revoke", stale))
    _refused(c.post(f"/console/agents/{b.agent.id}/", {"op": "key", "name": "k", "scopes": ["read"], **stale}))
    _refused(c.post(f"/console/teams/{b.team.id}/", {"op": "delete", **stale}))
    assert Invitation.objects.count() == invitations and Agent.objects.count() == agents
    assert Membership.objects.get(org=b.org, user=a.member).role == "member"
    key.refresh_from_db()
    assert key.revoked_at is None
    assert ApiKey.objects.filter(agent=b.agent).count() == 1
    assert Team.objects.filter(id=b.team.id).exists()


def test_owner_matching_marker_acts(two_orgs, login):
    c = _on_beta(login, two_orgs["a"].owner)
    r = c.post("/console/teams/", {"name": "Fresh", "nylon_org": "beta"})
    assert r.status_code == 302
    assert Team.objects.get(name="Fresh").org == two_orgs["b"].org


def test_owner_without_a_marker_acts_in_the_session_org(two_orgs, login):
    """A client without the console's script names no org: it acts in the session's, as before."""
    c = _on_beta(login, two_orgs["a"].owner)
    assert c.post("/console/teams/", {"name": "Plain"}).status_code == 302
    assert Team.objects.get(name="Plain").org == two_orgs["b"].org


def test_owner_org_switch_from_a_stale_page_is_not_refused(two_orgs, login):
    c = _on_beta(login, two_orgs["a"].owner)
    r = c.post("/console/org", {"org": "alpha", "next": "/console/teams/", "nylon_org": "alpha"},
               HTTP_X_NYLON_PAGE_ORG="gamma")
    assert r.status_code == 302 and r["Location"] == "/console/teams/"
    assert c.get("/console/teams/").wsgi_request.org.slug == "alpha"


def test_member_stale_page_is_refused_before_any_permission_check(two_orgs, login):
    c = _on_beta(login, two_orgs["a"].member)
    _refused(c.post("/console/teams/", {"name": "Stale", "nylon_org": "alpha"}))
    assert not Team.objects.filter(name="Stale").exists()
    # With its own org's marker the member meets the same refusal as before (not an admin).
    assert c.post("/console/teams/", {"name": "Stale", "nylon_org": "beta"}).status_code == 403


def test_outsider_still_gets_the_no_org_page(two_orgs, login):
    r = login(two_orgs["outsider"]).post("/console/teams/", {"name": "Stale", "nylon_org": "alpha"})
    assert r.status_code == 403 and not Team.objects.filter(name="Stale").exists()
