"""The lifecycle buttons of the console's asset page, for every role on assets in every state:
the page offers exactly the moves the console POST and the REST API accept, and both equal a
table written out here by hand (so a change of ``assets.services.transition_allowed``, which the
page and the service share, shows up as a difference from the table, not as a silent agreement)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction

from assets import services
from assets.models import Asset, AssetStatus
from memory.models import Visibility
from teams.models import Membership, Role, TeamMembership, TeamRole
from tests.assets.helpers import moved

from .conftest import actor

pytestmark = pytest.mark.django_db

ROLES = ("member", "lead", "admin", "owner", "beta", "outsider")

# scenario → {role: moves it may make}; a role not named may make none (and most of those cannot
# even read the asset). member owns every asset but the *_org ones, which the org owner owns;
# lead is a team admin of the core team, admin an org admin outside it.
EXPECTED: dict[str, dict[str, set[str]]] = {
    "draft_private": {"member": {"candidate"}},
    "candidate_private": {"member": {"approved", "draft"}},
    "candidate_to_team": {"member": {"draft"}, "lead": {"approved", "draft"}, "admin": {"approved", "draft"},
                          "owner": {"approved", "draft"}},
    "candidate_to_org": {"member": {"draft"}, "admin": {"approved", "draft"}, "owner": {"approved", "draft"}},
    "approved_team": {"member": {"deprecated"}, "lead": {"deprecated"}},
    "draft_org": {"admin": {"candidate"}, "owner": {"candidate"}},
    "deprecated_org": {"admin": {"archived"}, "owner": {"archived"}},
    "archived_org": {},
    "restricted_draft": {"member": {"candidate"}, "admin": {"candidate"}},
}


@pytest.fixture
def people(world):
    a = world["a"]
    lead = get_user_model().objects.create_user("alpha-lead", "alpha-lead@example.com", "pw-lead-123")
    Membership.objects.create(org=a.org, user=lead, role=Role.MEMBER)
    TeamMembership.objects.create(org=a.org, team=a.team, user=lead, role=TeamRole.ADMIN)
    return {"member": a.member, "lead": lead, "admin": a.admin, "owner": a.owner, "beta": world["b"].owner,
            "outsider": world["outsider"]}


def _scenario(name: str, world, people) -> Asset:
    a = world["a"]
    member, owner = actor(a.member, a.org), actor(a.owner, a.org)

    def new(act, visibility=Visibility.PRIVATE) -> Asset:
        return services.asset_create(actor=act, kind="wiki", title=name, body="b", visibility=visibility)

    def move(act, asset, *states) -> Asset:
        for to in states:
            asset = services.asset_transition(actor=act, asset=asset, to=to, expected_version=asset.version)
        return asset

    if name == "draft_private":
        return new(member)
    if name == "candidate_private":
        return move(member, new(member), "candidate")
    if name == "candidate_to_team":
        return services.asset_promote(actor=member, asset=new(member), visibility="team", team=a.team)
    if name == "candidate_to_org":
        return services.asset_promote(actor=member, asset=new(member), visibility="org", team=None)
    if name == "approved_team":
        asset = services.asset_promote(actor=member, asset=new(member), visibility="team", team=a.team)
        return move(actor(a.admin, a.org), asset, "approved")
    if name == "draft_org":
        return new(owner, Visibility.ORG)
    if name == "deprecated_org":
        return move(owner, new(owner, Visibility.ORG), "candidate", "approved", "deprecated")
    if name == "archived_org":
        return move(owner, new(owner, Visibility.ORG), "candidate", "approved", "deprecated", "archived")
    if name == "restricted_draft":
        asset, _ = services.asset_update(actor=member, asset=new(member), data={"visibility": "restricted"},
                                         expected_version=1)
        obj, reason = services.acl_object_for_admin(member, "asset", asset.id)
        for who, permission in ((people["lead"], "read"), (a.admin, "write")):
            services.grant_create(actor=member, obj=obj, object_type="asset", reason=reason, grantee_kind="user",
                                  user_id=who.id, permission=permission)
        return asset
    raise AssertionError(name)


def _offered(client, asset_id: int) -> set[str]:
    r = client.get(f"/console/assets/{asset_id}/")
    assert r.status_code in (200, 403, 404)
    return set(re.findall(r'id="transition-(\w+)"', r.content.decode())) if r.status_code == 200 else set()


class _Undo(Exception):
    pass


def _accepted(client, url: str, data: dict, *, asset_id: int, to: str, **kwargs) -> bool:
    """Whether POSTing ``data`` moved the asset to ``to``; every write the request made is rolled
    back, so the next attempt starts from the same state."""
    if Asset.objects.get(id=asset_id).status == to:
        return False  # no state moves to itself; a refused request would look like success
    try:
        with transaction.atomic():
            client.post(url, data, **kwargs)
            raise _Undo(Asset.objects.get(id=asset_id).status == to)
    except _Undo as undo:
        return undo.args[0]


@pytest.mark.parametrize("scenario", list(EXPECTED))
def test_the_console_offers_exactly_what_the_service_accepts(scenario, world, people, login, client_for):
    asset = _scenario(scenario, world, people)
    for role in ROLES:
        user = people[role]
        expected = EXPECTED[scenario].get(role, set())
        console, api = login(user), client_for(user)
        assert _offered(console, asset.id) == expected, (scenario, role)
        by_console = {to for to in AssetStatus.values if _accepted(
            console, f"/console/assets/{asset.id}/", {"op": "transition", "to": to, "expected_version": asset.version},
            asset_id=asset.id, to=to)}
        by_api = {to for to in AssetStatus.values if _accepted(
            api, f"/api/v1/assets/{asset.id}/transition", moved(asset.id, to), asset_id=asset.id, to=to,
            format="json")}
        assert by_console == expected, (scenario, role)
        assert by_api == expected, (scenario, role)


def test_transition_allowed_is_what_the_service_enforces(world, people):
    """The predicate on its own, for an agent too (agents have no console): false exactly where
    ``asset_transition`` refuses."""
    a = world["a"]
    from teams.auth import actor_for_agent

    bot = actor_for_agent(a.agent, scopes=frozenset({"read", "write"}))
    own = services.asset_create(actor=bot, kind="wiki", title="bot note", body="b")
    assert services.allowed_transitions(actor=bot, asset=own) == ["candidate"]
    own = services.asset_transition(actor=bot, asset=own, to="candidate")
    # an agent owns the candidate: it may withdraw it, never approve it
    assert services.allowed_transitions(actor=bot, asset=own) == ["draft"]
    from rest_framework.exceptions import PermissionDenied

    with pytest.raises(PermissionDenied):
        services.asset_transition(actor=bot, asset=own, to="approved")
    assert Asset.objects.get(id=own.id).status == "candidate"
    assert not services.transition_allowed(actor=bot, asset=own, to="archived")  # illegal from candidate
