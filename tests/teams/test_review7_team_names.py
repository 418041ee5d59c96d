"""A team name that equals another team's of the same org after trimming and case-folding is a 400
on name, through the API and the service alike; names are stored trimmed. Before, "Platform",
"Platform" and "platform " could all be created and the Team selects listed look-alikes."""

from __future__ import annotations

import pytest
from rest_framework.exceptions import ValidationError

from assets.models import AuditEvent
from teams import services
from teams.auth import actor_for_user
from teams.models import Team

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("name", ["alpha core", "Alpha Core", "  ALPHA CORE  ", "alpha core\t"])
def test_create_of_a_look_alike_is_400_on_name(world, client_for, name):
    a = world["a"]
    before = Team.objects.count()
    r = client_for(a.admin).post("/api/v1/teams", {"name": name}, format="json")
    assert r.status_code == 400
    assert "name" in r.json()["error"]["fields"]
    assert Team.objects.count() == before
    assert not AuditEvent.objects.filter(org=a.org, action="team.create").exists()


def test_case_folding_not_just_lower_case(world):
    a = world["a"]
    act = actor_for_user(a.admin, a.org)
    services.team_create(actor=act, name="Straße")
    with pytest.raises(ValidationError) as exc:
        services.team_create(actor=act, name="STRASSE")
    assert "name" in exc.value.detail


def test_names_are_stored_trimmed_and_other_orgs_do_not_clash(world, client_for):
    a, b = world["a"], world["b"]
    team = services.team_create(actor=actor_for_user(a.admin, a.org), name="  Platform \n")
    assert team.name == "Platform"
    ev = AuditEvent.objects.get(org=a.org, action="team.create", object_id=str(team.id))
    assert ev.detail["name"] == "Platform"
    # Another org's namesake is not a look-alike here.
    r = client_for(b.admin).post("/api/v1/teams", {"name": "platform"}, format="json")
    assert r.status_code == 201


def test_rename_to_a_look_alike_is_400_and_changes_nothing(world, client_for):
    a = world["a"]
    ops = services.team_create(actor=actor_for_user(a.admin, a.org), name="Ops")
    c = client_for(a.admin)
    r = c.patch(f"/api/v1/teams/{ops.id}", {"name": " ALPHA core "}, format="json")
    assert r.status_code == 400 and "name" in r.json()["error"]["fields"]
    assert Team.objects.get(id=ops.id).name == "Ops"
    assert not AuditEvent.objects.filter(org=a.org, action="team.update").exists()


def test_renaming_a_team_to_its_own_name_in_another_case_is_allowed(world, client_for):
    a = world["a"]
    r = client_for(a.admin).patch(f"/api/v1/teams/{a.team.id}", {"name": " Alpha Core "}, format="json")
    assert r.status_code == 200 and r.json()["name"] == "Alpha Core"
    assert Team.objects.get(id=a.team.id).name == "Alpha Core"


def test_look_alikes_made_before_the_rule_still_save_their_other_fields(world):
    a = world["a"]
    twin = Team.objects.create(org=a.org, name="alpha core", slug="core-2")
    act = actor_for_user(a.admin, a.org)
    services.team_update(actor=act, team=twin, data={"description": "the old twin"})
    services.team_update(actor=act, team=twin, data={"name": "alpha core", "description": "unchanged name"})
    assert Team.objects.get(id=twin.id).description == "unchanged name"
    # Renaming one of them to something free resolves it.
    services.team_update(actor=act, team=twin, data={"name": "Alpha legacy"})
    assert Team.objects.get(id=twin.id).name == "Alpha legacy"
