"""Switching org keeps the page's path but drops its query string: its filters name rows of the org
just left (``?team=<alpha's team>`` is no choice in beta: a 400 "Select a valid choice"), so the new
org's page opens unfiltered."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db



@pytest.mark.parametrize("who", ["owner", "member"])
def test_filtered_list_opens_unfiltered_in_the_new_org(two_orgs, login, who):
    a = two_orgs["a"]
    c = login(getattr(a, who))
    filtered = f"/console/memories/?team={a.team.id}&kind=leaf"
    assert c.get(filtered).status_code == 200  # alpha: a valid filter
    r = c.post("/console/org", {"org": "beta", "next": filtered})
    assert r.status_code == 302 and r["Location"] == "/console/memories/"
    after = c.get(r["Location"])
    assert after.status_code == 200 and after.wsgi_request.org.slug == "beta"


@pytest.mark.parametrize(("next_url", "target"), [
    ("/console/assets/?kind=skill&after=12", "/console/assets/"),
    ("http://testserver/console/audit/?actor=x#top", "/console/audit/"),
    ("/console/agents/7/?x=1", "/console/agents/"),  # an object page: its list, as before
    ("?team=1", "/console/"),
    # The bare path of a same-host URL may be another site's ("//evil.example/"): not followed.
    ("http://testserver//evil.example/console/", "/console/"),
])
def test_owner_query_string_is_dropped(two_orgs, login, next_url, target):
    r = login(two_orgs["a"].owner).post("/console/org", {"org": "beta", "next": next_url})
    assert r.status_code == 302 and r["Location"] == target


def test_outsider_cannot_switch(two_orgs, login):
    r = login(two_orgs["outsider"]).post("/console/org", {"org": "beta", "next": "/console/memories/?kind=leaf"})
    assert r.status_code == 403
