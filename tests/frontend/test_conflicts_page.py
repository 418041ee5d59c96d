"""The console's conflicts queue: side by side, resolved through the same service and audit as the
API, and only conflicts whose both memories the viewer may read."""

from __future__ import annotations

import re

import pytest

from assets.models import AuditEvent
from memory.models import Edge, Node, Visibility
from reflection.models import Conflict
from tests.assets.helpers import grant

from .conftest import actor, weave

pytestmark = pytest.mark.django_db


@pytest.fixture
def conflict(world, mem):
    a = world["a"]
    return Conflict.objects.create(org=a.org, node_a_id=mem.owner_org, node_b_id=mem.agent_org,
                                   reason="different date for the same event", detector="rule")


@pytest.fixture
def hidden_conflict(world, mem):
    a = world["a"]
    return Conflict.objects.create(org=a.org, node_a_id=mem.owner_org, node_b_id=mem.owner_private,
                                   reason="negation flip", detector="rule")


def test_queue_shows_visible_conflicts_side_by_side(world, login, conflict, hidden_conflict):
    html = login(world["a"].member).get("/console/conflicts/").content.decode()
    assert f'id="conflict-{conflict.id}"' in html
    assert "Everyone: the Lisbon offsite is on March 14." in html and "flights to Lisbon are booked" in html
    # a conflict touching someone else's private memory is not listed, and its text never shown
    assert f'id="conflict-{hidden_conflict.id}"' not in html and "salary review" not in html


def test_supersede_from_the_console_closes_the_older_memory_and_is_audited(world, login, conflict, mem):
    c = login(world["a"].owner)
    r = c.post(f"/console/conflicts/{conflict.id}/resolve", {"action": "supersede", "keep": str(mem.agent_org)})
    assert r.status_code == 302
    conflict.refresh_from_db()
    assert conflict.status == "superseded" and conflict.kept_node_id == mem.agent_org
    assert Node.objects.get(id=mem.owner_org).valid_to is not None  # nothing deleted, validity closed
    assert Edge.objects.filter(src_id=mem.agent_org, dst_id=mem.owner_org, kind="supersedes").exists()
    assert AuditEvent.objects.filter(org=world["a"].org, action="conflict.resolve",
                                     object_id=str(conflict.id)).exists()
    resolved = c.get("/console/conflicts/?status=superseded").content.decode()
    assert re.search(rf'id="conflict-{conflict.id}"', resolved)
    # an unknown status is said, then the open queue is shown (it was the open list, silently)
    r = c.get("/console/conflicts/?status=bogus", follow=True)
    assert r.redirect_chain and r.redirect_chain[-1][0].endswith("/console/conflicts/")
    assert "Unknown status: bogus." in r.content.decode()


def test_keep_both_and_refusals(world, login, conflict, hidden_conflict):
    a, b = world["a"], world["b"]
    # a member who owns neither memory may not supersede: refused, nothing changes
    r = login(a.member).post(f"/console/conflicts/{conflict.id}/resolve", {"action": "supersede",
                                                                           "keep": str(conflict.node_b_id)})
    assert r.status_code == 403
    assert Conflict.objects.get(id=conflict.id).status == "open"
    # hidden or other-org conflicts are 404
    assert login(a.member).post(f"/console/conflicts/{hidden_conflict.id}/resolve",
                                {"action": "reject"}).status_code == 404
    assert login(b.owner).post(f"/console/conflicts/{conflict.id}/resolve", {"action": "reject"}).status_code == 404
    assert login(world["outsider"]).get("/console/conflicts/").status_code == 403
    # keeping both (or rejecting) closes the conflict for good: it needs write access to one of the
    # two memories too, so the member who owns neither is refused and the owner may
    for action in ("keep_both", "reject"):
        r = login(a.member).post(f"/console/conflicts/{conflict.id}/resolve", {"action": action})
        assert r.status_code == 403
        assert Conflict.objects.get(id=conflict.id).status == "open"
    assert login(a.owner).post(f"/console/conflicts/{conflict.id}/resolve", {"action": "keep_both"}).status_code == 302
    assert Conflict.objects.get(id=conflict.id).status == "kept_both"


def test_node_drawer_shows_conflicts_and_versions(world, login, conflict, hidden_conflict, mem):
    a = world["a"]
    member = login(a.member)
    drawer = member.get(f"/console/memories/{mem.owner_org}/").content.decode()
    conflicts = drawer.split('id="node-conflicts"')[1].split("</ul>")[0]
    # the open conflict with a memory the member may read is listed with a way to resolve it ...
    assert f"#{mem.agent_org}" in conflicts and f"#conflict-{conflict.id}" in conflicts
    # ... the one with someone's private memory is not, and its text never shown
    assert f"#{mem.owner_private}" not in conflicts and "salary review" not in drawer
    assert "The current and only version." in drawer

    r = login(a.owner).post(f"/console/conflicts/{conflict.id}/resolve",
                            {"action": "supersede", "keep": str(mem.agent_org)})
    assert r.status_code == 302
    older = member.get(f"/console/memories/{mem.owner_org}/").content.decode()
    versions = older.split('id="node-versions"')[1].split("</ul>")[0]
    assert "Superseded on" in versions and "replaced by" in versions and f"#{mem.agent_org}" in versions
    newer = member.get(f"/console/memories/{mem.agent_org}/").content.decode()
    versions = newer.split('id="node-versions"')[1].split("</ul>")[0]
    assert "replaces" in versions and f"#{mem.owner_org}" in versions
    assert "superseded" in newer.split('id="node-conflicts"')[1].split("</ul>")[0]


def test_a_read_only_acl_grant_does_not_let_an_org_admin_supersede_from_the_console(world, login, client_for):
    """The console resolves through the same service, so the node write rule holds there too."""
    a = world["a"]
    old, new = weave(actor(a.member, a.org), "The Nimbus deal closes in May.", "The Nimbus deal closes in June.",
                     visibility=Visibility.RESTRICTED)
    for nid in (old, new):
        grant(client_for(a.member), "node", nid, grantee_kind="user", user_id=a.admin.id)  # read only
    c = Conflict.objects.create(org=a.org, node_a_id=old, node_b_id=new, reason="different month", detector="rule")
    r = login(a.admin).post(f"/console/conflicts/{c.id}/resolve", {"action": "supersede", "keep": str(new)})
    assert r.status_code == 403
    assert Node.objects.get(id=old).valid_to is None and Conflict.objects.get(id=c.id).status == "open"
