"""The console's team forms show a look-alike team name as an error on Name (400, input kept),
like the API's 400. Before, the service allowed it; and a service refusal became a flash over an
empty form."""

from __future__ import annotations

import pytest

from teams.models import Team

pytestmark = pytest.mark.django_db


def test_create_of_a_look_alike_is_an_error_on_name(world, login):
    a = world["a"]
    before = Team.objects.filter(org=a.org).count()
    r = login(a.admin).post("/console/teams/", {"name": "Alpha Core ", "description": "typed text"})
    html = r.content.decode()
    assert r.status_code == 400
    form = html.split('id="team-create"', 1)[1].split("</form>", 1)[0]
    assert "A team with this name already exists." in form.split('name="name"', 1)[1].split("<label>", 1)[0]
    assert 'value="Alpha Core "' in form and 'value="typed text"' in form
    assert Team.objects.filter(org=a.org).count() == before


def test_rename_to_a_look_alike_is_an_error_on_name(world, login):
    a = world["a"]
    ops = Team.objects.create(org=a.org, name="Ops", slug="ops")
    r = login(a.admin).post(f"/console/teams/{ops.id}/", {"op": "edit", "name": "ALPHA CORE", "description": "x"})
    html = r.content.decode()
    assert r.status_code == 400
    assert "A team with this name already exists." in html and 'value="ALPHA CORE"' in html
    assert Team.objects.get(id=ops.id).name == "Ops"


def test_a_distinct_name_is_still_created(world, login):
    r = login(world["a"].admin).post("/console/teams/", {"name": "  Platform  "})
    team = Team.objects.get(org=world["a"].org, name="Platform")
    assert r.status_code == 302 and r["Location"] == f"/console/teams/{team.id}/"
