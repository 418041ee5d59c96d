"""A service's refusal of a POST-only console action (a ValidationError) redirects to the page the
action was taken on, with the error shown: redirecting to the action's own URL answered the
browser's follow-up GET with a 405 and the message was never seen."""

from __future__ import annotations

import pytest

from reflection.models import Conflict
from teams.models import Membership, Role

pytestmark = pytest.mark.django_db


def _messages(r) -> list[str]:
    return [str(m) for m in r.context["messages"]]


def test_supersede_without_a_kept_memory_shows_the_error_on_the_queue(world, login, mem):
    conflict = Conflict.objects.create(org=world["a"].org, node_a_id=mem.owner_org, node_b_id=mem.agent_org,
                                       reason="different date", detector="rule")
    r = login(world["a"].owner).post(f"/console/conflicts/{conflict.id}/resolve", {"action": "supersede"},
                                     follow=True)
    assert r.status_code == 200
    assert r.redirect_chain[-1][0] == "/console/conflicts/"
    assert any("Supersede needs the node to keep." in m for m in _messages(r))
    conflict.refresh_from_db()
    assert conflict.status == Conflict.Status.OPEN


def test_the_last_owner_demoting_themselves_sees_why_on_the_members_page(world, login):
    a = world["a"]
    assert Membership.objects.filter(org=a.org, role=Role.OWNER).count() == 1
    r = login(a.owner).post(f"/console/members/{a.owner.id}", {"role": "member"}, follow=True)
    assert r.status_code == 200
    assert r.redirect_chain[-1][0] == "/console/members/"
    assert any("at least one owner" in m for m in _messages(r))
    assert Membership.objects.get(org=a.org, user=a.owner).role == Role.OWNER
