"""The conflicts queue offers each viewer exactly the resolutions the resolve service accepts from
them, and tells the others who can resolve (first-user audit: a team member was shown every button,
each one ending on a bare 403 page)."""

from __future__ import annotations

import re

import pytest
from django.db import transaction

from memory.models import Visibility
from reflection.models import Conflict

from .conftest import actor, weave

pytestmark = pytest.mark.django_db

ROLES = ("member", "admin", "owner")


def _conflict(world, scenario: str) -> Conflict:
    a = world["a"]
    member, owner = actor(a.member, a.org), actor(a.owner, a.org)
    if scenario == "org_pair":  # two org-wide memories, neither the member's
        old = weave(owner, "The offsite is on March 14.")[0]
        new = weave(owner, "The offsite is on March 15.")[0]
    elif scenario == "team_pair":  # the member's own team memories
        old, new = weave(member, "Core ships on Monday.", "Core ships on Tuesday.", visibility=Visibility.TEAM,
                         team=a.team)
    elif scenario == "mixed":  # the member's team memory against the owner's org-wide one
        old = weave(owner, "The venue is Alfama.")[0]
        new = weave(member, "The venue is Belem.", visibility=Visibility.TEAM, team=a.team)[0]
    else:
        raise AssertionError(scenario)
    return Conflict.objects.create(org=a.org, node_a_id=old, node_b_id=new, reason="different value",
                                   detector="rule")


def _section(html: str, conflict_id: int) -> str | None:
    m = re.search(rf'<section class="conflict" id="conflict-{conflict_id}">(.*?)</section>', html, re.S)
    return m.group(1) if m else None


def _offered(client, conflict: Conflict) -> set[str] | None:
    section = _section(client.get("/console/conflicts/").content.decode(), conflict.id)
    if section is None:
        return None  # not listed: the viewer cannot read both memories
    out = set(re.findall(r'name="action" value="(keep_both|reject)"', section))
    out |= {f"supersede:{k}" for k in re.findall(r'value="supersede" data-keep="(\d+)"', section)}
    return out


class _Undo(Exception):
    pass


def _accepted(client, conflict: Conflict) -> set[str]:
    """Every resolution the console POST accepts from this client, each one rolled back."""
    out = set()
    tries = [("keep_both", None), ("reject", None), ("supersede", conflict.node_a_id),
             ("supersede", conflict.node_b_id)]
    for action, keep in tries:
        try:
            with transaction.atomic():
                client.post(f"/console/conflicts/{conflict.id}/resolve",
                            {"action": action, "keep": "" if keep is None else str(keep)})
                raise _Undo(Conflict.objects.get(id=conflict.id).status != Conflict.Status.OPEN)
        except _Undo as undo:
            if undo.args[0]:
                out.add(action if keep is None else f"supersede:{keep}")
    return out


@pytest.mark.parametrize("scenario", ["org_pair", "team_pair", "mixed"])
def test_the_queue_offers_exactly_the_resolutions_the_service_accepts(scenario, world, login):
    a = world["a"]
    people = {"member": a.member, "admin": a.admin, "owner": a.owner}
    conflict = _conflict(world, scenario)
    shown_any = False
    for role in ROLES:
        client = login(people[role])
        offered = _offered(client, conflict)
        if offered is None:
            continue
        shown_any = True
        assert offered == _accepted(client, conflict), (scenario, role)
    assert shown_any


def test_the_member_is_shown_who_can_resolve_instead_of_buttons(world, login):
    conflict = _conflict(world, "org_pair")
    section = _section(login(world["a"].member).get("/console/conflicts/").content.decode(), conflict.id)
    assert section is not None
    assert "<button" not in section and "<form" not in section
    assert ("You may not change either memory: an admin of the organisation or the memories&#x27; owners can "
            "resolve this conflict.") in section


def test_a_member_who_owns_one_side_may_close_their_own_but_not_the_other(world, login):
    a = world["a"]
    conflict = _conflict(world, "mixed")
    offered = _offered(login(a.member), conflict)
    # superseding closes the memory not kept: the member may close their own (keeping the owner's),
    # never the owner's org-wide one
    assert offered == {"keep_both", "reject", f"supersede:{conflict.node_a_id}"}


def test_a_side_another_resolution_replaced_is_not_offered_to_keep(world, login):
    """The service refuses to keep a superseded memory; the queue does not offer it either."""
    from django.utils import timezone

    from memory.models import Node

    a = world["a"]
    conflict = _conflict(world, "org_pair")
    Node.objects.filter(id=conflict.node_b_id).update(valid_to=timezone.now())  # replaced elsewhere
    client = login(a.owner)
    offered = _offered(client, conflict)
    assert f"supersede:{conflict.node_b_id}" not in offered and f"supersede:{conflict.node_a_id}" in offered
    assert offered == _accepted(client, conflict)
