"""POST /api/v1/grants names its grantee by the one id of its grantee_kind: a missing id is a
required-field error (it used to read "Not a member of this organisation."), and an id of another
kind is a 400 (it used to be ignored behind a 201)."""

from __future__ import annotations

import pytest

from assets.models import AccessGrant
from tests.assets.helpers import weave

pytestmark = pytest.mark.django_db


def _post(client, **body):
    return client.post("/api/v1/grants", body, format="json")


@pytest.fixture
def node(world, client_for):
    return weave(client_for(world["a"].member), "Salary bands for 2025.", visibility="restricted")


@pytest.mark.parametrize("kind,field", [("user", "user_id"), ("agent", "agent_id"), ("team_role", "team_id")])
def test_a_missing_grantee_id_is_required(world, client_for, node, kind, field):
    for body in ({}, {field: None}):
        r = _post(client_for(world["a"].member), object_type="node", object_id=node, grantee_kind=kind, **body)
        assert r.status_code == 400, r.content
        assert r.json()["error"]["fields"] == {field: ["This field is required."]}


def test_an_id_of_another_grantee_kind_is_refused(world, client_for, node):
    a = world["a"]
    r = _post(client_for(a.member), object_type="node", object_id=node, grantee_kind="user", user_id=a.admin.id,
              agent_id=a.agent.id)
    assert r.status_code == 400, r.content
    assert r.json()["error"]["fields"] == {"agent_id": ['Not used for grantee_kind "user": give only user_id.']}
    r = _post(client_for(a.member), object_type="node", object_id=node, grantee_kind="agent", agent_id=a.agent.id,
              team_id=a.team.id, team_role="admin")
    assert r.status_code == 400, r.content
    assert set(r.json()["error"]["fields"]) == {"team_id", "team_role"}
    assert not AccessGrant.objects.filter(org=a.org).exists()


def test_a_grant_with_only_its_own_id_is_made(world, client_for, node):
    a = world["a"]
    r = _post(client_for(a.member), object_type="node", object_id=node, grantee_kind="user", user_id=a.admin.id,
              agent_id=None)
    assert r.status_code == 201, r.content
    r = _post(client_for(a.member), object_type="node", object_id=node, grantee_kind="team_role", team_id=a.team.id,
              team_role="admin")
    assert r.status_code == 201, r.content
