"""Switching org from an object page lands on that section's list page in the new org, not on the
object's URL (a row of the org just left, so a bare 404 there). List pages are kept (their path:
the query string is dropped, test_org_switch_drops_query.py), and an off-site ``next`` is still
ignored."""

from __future__ import annotations

import pytest

from teams.models import Membership

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_org_member(world, login):
    a, b = world["a"], world["b"]
    Membership.objects.create(org=b.org, user=a.member, role="member")
    return login(a.member)


@pytest.mark.parametrize(("next_url", "target"), [
    ("/console/assets/10/", "/console/assets/"),
    ("/console/assets/10/acl/", "/console/assets/"),
    ("/console/memories/14/", "/console/memories/"),
    ("/console/memories/14/graph/", "/console/memories/"),
    ("/console/teams/3/", "/console/teams/"),
    ("/console/agents/7/?x=1", "/console/agents/"),
    ("http://testserver/console/assets/10/", "/console/assets/"),
    # An action URL whose prefix is no page: the dashboard.
    ("/console/invitations/4/revoke", "/console/"),
])
def test_object_page_goes_to_its_section_list(two_org_member, next_url, target):
    r = two_org_member.post("/console/org", {"org": "beta", "next": next_url})
    assert r.status_code == 302 and r["Location"] == target
    after = two_org_member.get(r["Location"])
    assert after.status_code == 200 and after.wsgi_request.org.slug == "beta"


@pytest.mark.parametrize(("next_url", "target"), [("/console/assets/?kind=skill", "/console/assets/"),
                                                  ("/console/audit/", "/console/audit/"), ("/console/", "/console/")])
def test_list_pages_are_kept(two_org_member, next_url, target):
    r = two_org_member.post("/console/org", {"org": "beta", "next": next_url})
    assert r.status_code == 302 and r["Location"] == target


@pytest.mark.parametrize("next_url", ["https://evil.example/console/assets/10/", "//evil.example/console/assets/1/",
                                      ""])
def test_off_site_or_missing_next_goes_to_the_dashboard(two_org_member, next_url):
    r = two_org_member.post("/console/org", {"org": "beta", "next": next_url})
    assert r.status_code == 302 and r["Location"] == "/console/"
