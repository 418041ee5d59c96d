"""Role changes and removals judge the membership as it is when they commit, not as the API
loaded it before the transaction (a stale role let an admin demote or remove a fresh owner)."""

from __future__ import annotations

import pytest
from django.http import Http404
from rest_framework.exceptions import PermissionDenied

from teams import services
from teams.auth import actor_for_user
from teams.models import Membership, Role

pytestmark = pytest.mark.django_db


def _stale_then_promoted(a) -> Membership:
    stale = Membership.objects.get(org=a.org, user=a.member)  # loaded while still a member
    Membership.objects.filter(pk=stale.pk).update(role=Role.OWNER)  # an owner promotes meanwhile
    return stale


def test_admin_cannot_demote_an_owner_through_a_stale_role(world):
    a = world["a"]
    stale = _stale_then_promoted(a)
    with pytest.raises(PermissionDenied):
        services.member_set_role(actor=actor_for_user(a.admin, a.org), membership=stale, role=Role.MEMBER)
    assert Membership.objects.get(pk=stale.pk).role == Role.OWNER


def test_admin_cannot_remove_an_owner_through_a_stale_role(world):
    a = world["a"]
    stale = _stale_then_promoted(a)
    with pytest.raises(PermissionDenied):
        services.member_remove(actor=actor_for_user(a.admin, a.org), membership=stale)
    assert Membership.objects.filter(pk=stale.pk).exists()


def test_role_change_of_a_membership_removed_meanwhile_is_404(world):
    a = world["a"]
    stale = Membership.objects.get(org=a.org, user=a.member)
    Membership.objects.filter(pk=stale.pk).delete()
    with pytest.raises(Http404):
        services.member_set_role(actor=actor_for_user(a.owner, a.org), membership=stale, role=Role.ADMIN)
    assert not Membership.objects.filter(pk=stale.pk).exists()
