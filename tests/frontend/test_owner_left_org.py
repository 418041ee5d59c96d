"""A person removed from the org still owns what they wrote in it: the console names them, marked as
gone, instead of a bare ``user:<id>`` (first-user audit: an asset's owner showed as "user:4")."""

from __future__ import annotations

import pytest

from assets import services
from memory.models import Visibility
from teams import services as team_services
from teams.models import Membership

from .conftest import actor, weave

pytestmark = pytest.mark.django_db


def test_a_former_members_asset_and_memory_name_them(world, login):
    a = world["a"]
    member = actor(a.member, a.org)
    asset = services.asset_create(actor=member, kind="wiki", title="Deploy runbook", body="b",
                                  visibility=Visibility.PRIVATE)
    asset = services.asset_promote(actor=member, asset=asset, visibility="org", team=None)
    asset = services.asset_transition(actor=actor(a.admin, a.org), asset=asset, to="approved", expected_version=1)
    node_id = weave(member, "The deploy window is Tuesday.")[0]
    team_services.member_remove(actor=actor(a.owner, a.org),
                                membership=Membership.objects.get(org=a.org, user=a.member))
    admin = login(a.admin)
    label = "user:alpha-member (left the org)"
    assert label in admin.get(f"/console/assets/{asset.id}/").content.decode()
    assert label in admin.get("/console/assets/").content.decode()
    assert label in admin.get(f"/console/memories/{node_id}/").content.decode()
    memories = admin.get("/console/memories/").content.decode()
    assert label in memories and f"user:{a.member.id}<" not in memories


def test_members_and_agents_keep_their_plain_labels(world, login):
    a = world["a"]
    services.asset_create(actor=actor(a.owner, a.org), kind="wiki", title="Owner note", body="b",
                          visibility=Visibility.ORG)
    html = login(a.admin).get("/console/assets/").content.decode()
    assert "user:alpha-owner<" in html and "left the org" not in html
