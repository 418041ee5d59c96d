"""Team admins vs org admins in a team, 200/201 on team member set, empty PATCHes, idempotent agent
deactivation, and the unique-constraint races of team membership and team slugs."""

from __future__ import annotations

from unittest import mock

import pytest
from django.db.models import QuerySet
from rest_framework.exceptions import ValidationError

from assets.models import AuditEvent
from teams import services
from teams.auth import actor_for_user
from teams.models import Agent, Team, TeamMembership, TeamRole

pytestmark = pytest.mark.django_db


def _last_id() -> int:
    return AuditEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0


def _events(org, since: int, **kw) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(org=org, id__gt=since, **kw).order_by("id"))


@pytest.fixture
def team_admin_world(world):
    """alpha: the plain org member is a team admin of `core`; the org owner and admin are members."""
    a = world["a"]
    TeamMembership.objects.filter(team=a.team, user=a.member).update(role=TeamRole.ADMIN)
    for u in (a.owner, a.admin):
        TeamMembership.objects.create(org=a.org, team=a.team, user=u, role=TeamRole.MEMBER)
    return a


# 1. A team admin who is a plain org member cannot remove or re-role org owners/admins.

@pytest.mark.parametrize("who", ["owner", "admin"])
def test_team_admin_cannot_remove_org_admins_from_team(team_admin_world, client_for, who):
    a = team_admin_world
    target = getattr(a, who)
    since = _last_id()
    r = client_for(a.member).delete(f"/api/v1/teams/{a.team.id}/members/{target.id}")
    assert r.status_code == 403
    assert "organisation" in r.json()["error"]["message"]
    assert TeamMembership.objects.filter(team=a.team, user=target).exists()
    assert not _events(a.org, since, action="team.member_remove")
    assert len(_events(a.org, since, outcome="denied")) == 1


@pytest.mark.parametrize("who", ["owner", "admin"])
def test_team_admin_cannot_change_team_role_of_org_admins(team_admin_world, client_for, who):
    a = team_admin_world
    target = getattr(a, who)
    TeamMembership.objects.filter(team=a.team, user=target).update(role=TeamRole.ADMIN)
    since = _last_id()
    r = client_for(a.member).post(f"/api/v1/teams/{a.team.id}/members", {"user_id": target.id, "role": "member"},
                                  format="json")
    assert r.status_code == 403
    assert TeamMembership.objects.get(team=a.team, user=target).role == TeamRole.ADMIN
    assert not _events(a.org, since, action="team.member_set")
    assert len(_events(a.org, since, outcome="denied")) == 1


def test_team_admin_keeps_rights_over_plain_members(team_admin_world, client_for):
    a = team_admin_world
    b_user = a.member.__class__.objects.create_user("alpha-plain", "plain@example.com", "pw-plain-123")
    from teams.models import Membership, Role
    Membership.objects.create(org=a.org, user=b_user, role=Role.MEMBER)
    c = client_for(a.member)
    assert c.post(f"/api/v1/teams/{a.team.id}/members", {"user_id": b_user.id}, format="json").status_code == 201
    r = c.post(f"/api/v1/teams/{a.team.id}/members", {"user_id": b_user.id, "role": "admin"}, format="json")
    assert r.status_code == 200 and r.json()["role"] == "admin"
    assert c.delete(f"/api/v1/teams/{a.team.id}/members/{b_user.id}").status_code == 204


def test_org_admins_keep_full_rights_in_team(team_admin_world, client_for):
    a = team_admin_world
    c = client_for(a.admin)
    r = c.post(f"/api/v1/teams/{a.team.id}/members", {"user_id": a.owner.id, "role": "admin"}, format="json")
    assert r.status_code == 200
    assert c.delete(f"/api/v1/teams/{a.team.id}/members/{a.owner.id}").status_code == 204


# 2. 201 only on create; 200 and the old role in the audit on a role change.

def test_member_set_answers_201_then_200_with_old_role(world, client_for):
    a = world["a"]
    c = client_for(a.admin)
    url = f"/api/v1/teams/{a.team.id}/members"
    assert c.post(url, {"user_id": a.owner.id}, format="json").status_code == 201
    since = _last_id()
    r = c.post(url, {"user_id": a.owner.id, "role": "admin"}, format="json")
    assert r.status_code == 200
    (ev,) = _events(a.org, since, action="team.member_set")
    assert ev.detail["old_role"] == "member" and ev.detail["role"] == "admin"


def test_schema_documents_200_and_201():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    op = next(v["post"] for k, v in schema["paths"].items() if k.endswith("/teams/{team_id}/members"))
    assert {"200", "201"} <= set(op["responses"])


# 3. Empty PATCHes are no-ops.

def test_empty_patch_on_team_and_agent_is_a_noop(world, client_for):
    a = world["a"]
    c = client_for(a.admin)
    since = _last_id()
    with mock.patch.object(Team, "save") as team_save, mock.patch.object(Agent, "save") as agent_save:
        r1 = c.patch(f"/api/v1/teams/{a.team.id}", {}, format="json")
        r2 = c.patch(f"/api/v1/agents/{a.agent.id}", {}, format="json")
    assert r1.status_code == 200 and r1.json()["name"] == a.team.name
    assert r2.status_code == 200 and r2.json()["name"] == a.agent.name
    assert not team_save.called and not agent_save.called
    assert not _events(a.org, since)


# 4. Deactivating twice writes one entry.

def test_deleting_a_deactivated_agent_is_idempotent(world, client_for):
    a = world["a"]
    c = client_for(a.admin)
    assert c.delete(f"/api/v1/agents/{a.agent.id}").status_code == 200
    since = _last_id()
    r = c.delete(f"/api/v1/agents/{a.agent.id}")
    assert r.status_code == 200 and r.json()["is_active"] is False
    assert not _events(a.org, since, action="agent.deactivate")


# 5. Unique-constraint races.

def test_member_added_concurrently_is_200_not_500(world):
    a = world["a"]
    actor = actor_for_user(a.admin, a.org)
    real = services._find_team_membership

    def lookup_then_concurrent_insert(*, team, user_id):
        found = real(team=team, user_id=user_id)
        # Another request inserts the same membership between our lookup and our insert.
        TeamMembership.objects.create(org=a.org, team=team, user_id=user_id, role=TeamRole.MEMBER)
        return found

    since = _last_id()
    with mock.patch.object(services, "_find_team_membership", side_effect=lookup_then_concurrent_insert):
        tm, created = services.team_member_put(actor=actor, team=a.team, user_id=a.owner.id, role="admin")
    assert created is False
    assert TeamMembership.objects.filter(team=a.team, user=a.owner).count() == 1
    assert TeamMembership.objects.get(team=a.team, user=a.owner).role == "admin"
    (ev,) = _events(a.org, since, action="team.member_set")
    assert ev.detail["old_role"] == "member"


def test_team_slug_taken_concurrently_is_400_on_name(world):
    a = world["a"]
    since = _last_id()
    # The slug check ran before the other request committed: it saw no team with that slug.
    with mock.patch.object(QuerySet, "exists", return_value=False), pytest.raises(ValidationError) as exc:
        services.team_create(actor=actor_for_user(a.admin, a.org), name="Core")
    assert "name" in exc.value.detail
    assert Team.objects.filter(org=a.org, slug="core").count() == 1
    assert not _events(a.org, since, action="team.create")
