"""Console parity fixes: a conflict's ``keep`` validated as the API does, "keep the newer" decided by
the nodes' dates, the conflicts queue paged like the other lists, the dashboard's open conflicts
only, and unbinding decided by the API's rule (binding admin, no asset read)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from rest_framework.test import APIClient

from assets import services
from assets.models import AgentBinding
from memory.models import Node, Visibility
from reflection.models import Conflict

from .conftest import actor, weave

pytestmark = pytest.mark.django_db


@pytest.fixture
def conflict(world, mem):
    return Conflict.objects.create(org=world["a"].org, node_a_id=mem.owner_org, node_b_id=mem.agent_org,
                                   reason="different date for the same event", detector="rule")


# --- 1. keep --------------------------------------------------------------------------------------


@pytest.mark.parametrize("keep", ["abc", "0", "-3", "1.5"])
def test_invalid_keep_is_refused_and_nothing_is_written(world, login, conflict, keep):
    c = login(world["a"].owner)
    r = c.post(f"/console/conflicts/{conflict.id}/resolve", {"action": "keep_both", "keep": keep})
    assert r.status_code == 302
    assert "keep" in c.get(r["Location"]).content.decode()
    conflict.refresh_from_db()
    assert conflict.status == "open" and conflict.resolved_at is None
    r = c.post(f"/console/conflicts/{conflict.id}/resolve", {"action": "keep_both", "keep": keep},
               HTTP_HX_REQUEST="true")
    assert r.status_code == 400
    assert Conflict.objects.get(id=conflict.id).status == "open"
    # the API answers the same: 400, nothing written
    api = APIClient()
    api.force_login(world["a"].owner)
    assert api.post(f"/api/v1/conflicts/{conflict.id}/resolve", {"action": "keep_both", "keep": keep},
                    format="json").status_code == 400
    assert Conflict.objects.get(id=conflict.id).status == "open"


def test_empty_keep_is_no_node_as_in_the_api(world, login, conflict):
    r = login(world["a"].owner).post(f"/console/conflicts/{conflict.id}/resolve", {"action": "keep_both", "keep": ""})
    assert r.status_code == 302
    assert Conflict.objects.get(id=conflict.id).status == "kept_both"


# --- 2. keep the newer ----------------------------------------------------------------------------


def _keep_value(html: str, conflict_id: int) -> int:
    section = html.split(f'id="conflict-{conflict_id}"')[1].split("</section>")[0]
    return int(re.search(r'value="supersede" data-keep="(\d+)"', section).group(1))


def test_keep_the_newer_is_the_later_node_whichever_side(world, login, conflict, mem):
    a_node = Node.objects.get(id=conflict.node_a_id)
    Node.objects.filter(id=conflict.node_a_id).update(occurred_at=a_node.occurred_at + timedelta(days=30))
    Node.objects.filter(id=conflict.node_b_id).update(occurred_at=a_node.occurred_at)
    html = login(world["a"].owner).get("/console/conflicts/").content.decode()
    assert _keep_value(html, conflict.id) == conflict.node_a_id
    # the same date: the higher id is the newer
    Node.objects.filter(id=conflict.node_a_id).update(occurred_at=a_node.occurred_at)
    html = login(world["a"].owner).get("/console/conflicts/").content.decode()
    assert _keep_value(html, conflict.id) == conflict.node_b_id


# --- 3. paging ------------------------------------------------------------------------------------


def test_conflicts_page_has_load_more_keeping_the_status(world, login):
    a = world["a"]
    ids = sorted(weave(actor(a.owner, a.org), *[f"Note {i} about the Lisbon plan." for i in range(11)]))
    pairs = [(x, y) for i, x in enumerate(ids) for y in ids[i + 1:]]  # 55 pairs
    Conflict.objects.bulk_create([Conflict(org=a.org, node_a_id=x, node_b_id=y, reason="r", detector="rule",
                                           status="rejected") for x, y in pairs])
    c = login(a.owner)
    html = c.get("/console/conflicts/?status=rejected").content.decode()
    first = set(map(int, re.findall(r'id="conflict-(\d+)"', html)))
    assert len(first) == 50
    link = re.search(r'id="load-more"><a href="\?([^"]+)"', html).group(1).replace("&amp;", "&")
    assert "status=rejected" in link and "after=" in link
    html2 = c.get(f"/console/conflicts/?{link}").content.decode()
    second = set(map(int, re.findall(r'id="conflict-(\d+)"', html2)))
    assert len(second) == 5 and not first & second
    assert first | second == set(Conflict.objects.filter(org=a.org).values_list("id", flat=True))
    assert 'id="load-more"' not in html2
    # a malformed cursor is refused, not read as the first page
    r = c.get("/console/conflicts/?after=x")
    assert r.status_code == 302 and r["Location"] == "/console/conflicts/"  # not itself: no redirect loop


# --- 4. unbind ------------------------------------------------------------------------------------


def test_unbind_needs_the_binding_rule_not_asset_read(world, login):
    a = world["a"]
    owner = actor(a.owner, a.org)
    asset = services.asset_create(actor=owner, kind="wiki", title="Owner's restricted runbook", body="steps",
                                  visibility=Visibility.ORG)
    services.asset_update(actor=owner, asset=asset, data={"visibility": "restricted"}, expected_version=1)
    obj, reason = services.acl_object_for_admin(owner, "asset", asset.id)
    services.grant_create(actor=owner, obj=obj, object_type="asset", reason=reason, grantee_kind="agent",
                          agent_id=a.agent.id)
    services.binding_set(actor=owner, agent=a.agent, asset=asset, mode="full", priority=1)
    bid = AgentBinding.objects.get(asset=asset).id
    admin = login(a.admin)  # an org admin: a binding admin of the agent, not on the asset's ACL
    assert admin.get(f"/console/assets/{asset.id}/").status_code == 404
    # a member is still refused (require_binding_admin), as by the API
    assert login(a.member).post(f"/console/assets/{asset.id}/", {"op": "unbind", "binding_id": bid}).status_code == 403
    assert AgentBinding.objects.filter(id=bid).exists()
    r = admin.post(f"/console/assets/{asset.id}/", {"op": "unbind", "binding_id": bid})
    assert r.status_code == 302 and not AgentBinding.objects.filter(id=bid).exists()


# --- 5. dashboard ---------------------------------------------------------------------------------


def test_dashboard_lists_open_conflicts_only(world, login, mem):
    a = world["a"]
    open_ = Conflict.objects.create(org=a.org, node_a_id=mem.owner_org, node_b_id=mem.agent_org, reason="open one",
                                    detector="rule")
    done = Conflict.objects.create(org=a.org, node_a_id=mem.owner_org, node_b_id=mem.owner_private, reason="done one",
                                   detector="rule", status="rejected")
    html = login(a.owner).get("/console/").content.decode()
    assert "Open conflicts" in html
    assert f"#{open_.id}<" in html and f"#{done.id}<" not in html
