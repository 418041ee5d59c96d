from __future__ import annotations

import pytest
from django.db import connection

from teams.models import ApiKey

pytestmark = pytest.mark.django_db


def _create(client, agent_id, **body):
    return client.post(f"/api/v1/agents/{agent_id}/keys", body, format="json")


def test_key_lifecycle_create_use_revoke(world, client_for):
    a = world["a"]
    admin = client_for(a.admin)
    r = _create(admin, a.agent.id, name="ci", scopes=["read"])
    assert r.status_code == 201
    body = r.json()
    plain = body["key"]
    assert plain.startswith("nyl_") and body["prefix"] in plain

    agent = client_for(plain)
    assert agent.get("/api/v1/org").status_code == 200
    # read-only key cannot write
    assert agent.patch("/api/v1/org", {"name": "x"}, format="json").status_code == 403
    # listing never shows the secret again
    listing = admin.get(f"/api/v1/agents/{a.agent.id}/keys").json()["results"]
    assert all("key" not in k for k in listing)

    assert admin.post(f"/api/v1/keys/{body['id']}/revoke").status_code == 200
    assert agent.get("/api/v1/org").status_code == 401


def test_plain_key_is_stored_nowhere(world, client_for):
    a = world["a"]
    plain = _create(client_for(a.owner), a.agent.id).json()["key"]
    secret = plain.split("_", 2)[2]
    row = ApiKey.objects.get(prefix=plain.split("_")[1])
    assert secret not in row.secret_hash and len(row.secret_hash) == 64
    with connection.cursor() as cur:
        for table in ("teams_apikey", "assets_auditevent"):
            cur.execute(f"SELECT count(*) FROM {table} WHERE CAST({table}.* AS text) LIKE %s", [f"%{secret}%"])
            assert cur.fetchone()[0] == 0, table


def test_wrong_secret_and_garbage_keys_refused(world, client_for):
    a = world["a"]
    prefix = a.key.split("_")[1]
    for bad in (f"nyl_{prefix}_wrong", "nyl_", "garbage", "nyl_zzzz_" + "x" * 40):
        assert client_for(bad).get("/api/v1/org").status_code == 401


def test_key_of_one_org_never_acts_on_another(world, client_for):
    a, b = world["a"], world["b"]
    c = client_for(a.key)
    assert c.get("/api/v1/org").json()["slug"] == "alpha"
    # the org header cannot switch an agent into another org: naming another is refused
    r = c.get("/api/v1/org", HTTP_X_NYLON_ORG="beta")
    assert r.status_code == 400 and "beta" not in r.json()["error"]["fields"]["X-Nylon-Org"][0]
    b_key = ApiKey.objects.get(org=b.org)
    assert client_for(a.owner).post(f"/api/v1/keys/{b_key.id}/revoke").status_code == 404
    assert ApiKey.objects.get(pk=b_key.pk).revoked_at is None


def test_only_admins_manage_keys(world, client_for):
    a = world["a"]
    assert _create(client_for(a.member), a.agent.id).status_code == 403
    assert _create(client_for(a.key), a.agent.id).status_code == 403
    assert client_for(a.member).get(f"/api/v1/agents/{a.agent.id}/keys").status_code == 403
    # an agent may list its own keys
    assert client_for(a.key).get(f"/api/v1/agents/{a.agent.id}/keys").status_code == 200


def test_invalid_scope_is_400(world, client_for):
    r = _create(client_for(world["a"].owner), world["a"].agent.id, scopes=["admin"])
    assert r.status_code == 400 and "scopes" in r.json()["error"]["fields"]
