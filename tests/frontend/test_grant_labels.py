"""How a grantee is spelled: ``assets.services.grantee_key`` (ids: the audit's ``grantee``, the
grant form's value, parsed back by ``parse_grantee_key``) and ``grantee_label`` (names: the grant
form's choices, the ACL page's rows). For each kind of grantee, the key the console offers is the
key the grant is audited under, and the label it offers is the label the ACL row shows."""

from __future__ import annotations

import re

import pytest

from assets import services
from assets.models import AuditEvent
from memory.models import Visibility

from .conftest import actor

pytestmark = pytest.mark.django_db


def test_spellings():
    assert services.grantee_key("user", 7) == "user:7"
    assert services.grantee_key("agent", 3) == "agent:3"
    assert services.grantee_key("team_role", 2, "admin") == "team:2:admin"
    assert services.grantee_label("user", "ana") == "user:ana"
    assert services.grantee_label("agent", "bot") == "agent:bot"
    assert services.grantee_label("team_role", "core", "member") == "team:core (member)"
    for key, kwargs in (("user:7", {"grantee_kind": "user", "user_id": 7}),
                        ("agent:3", {"grantee_kind": "agent", "agent_id": 3}),
                        ("team:2:admin", {"grantee_kind": "team_role", "team_id": 2, "team_role": "admin"})):
        assert services.parse_grantee_key(key) == kwargs
    for junk in ("", "user", "user:x", "user:1:2", "team:2", "team:2:owner", "group:1", "agent:"):
        assert services.parse_grantee_key(junk) is None


@pytest.mark.parametrize("kind", ["user", "agent", "team_role"])
def test_the_offered_key_and_label_are_what_the_grant_is_audited_and_listed_as(kind, world, login):
    a = world["a"]
    asset = services.asset_create(actor=actor(a.owner, a.org), kind="wiki", title="Secret", body="b",
                                  visibility=Visibility.ORG)
    services.asset_update(actor=actor(a.owner, a.org), asset=asset, data={"visibility": "restricted"},
                          expected_version=1)
    key = {"user": f"user:{a.member.id}", "agent": f"agent:{a.agent.id}",
           "team_role": f"team:{a.team.id}:admin"}[kind]
    label = {"user": f"user:{a.member.username}", "agent": f"agent:{a.agent.name}",
             "team_role": f"team:{a.team.name} (admin)"}[kind]
    c = login(a.owner)
    url = f"/console/assets/{asset.id}/acl/"
    form = c.get(url).content.decode()
    assert re.search(rf'<option value="{re.escape(key)}">{re.escape(label)}</option>', form)
    r = c.post(url, {"op": "grant", "grantee": key, "permission": "read"})
    assert r.status_code == 302
    page = c.get(r["Location"]).content.decode()
    assert f"Access granted to {label}." in page
    assert re.search(rf'<tr data-grant-id="\d+"><td>{re.escape(label)}</td>', page)
    ev = AuditEvent.objects.filter(org=a.org, action="acl.grant", object_id=str(asset.id)).latest("id")
    assert ev.detail["grantee"] == key
    grant_id = int(re.search(r'data-grant-id="(\d+)"', page).group(1))
    c.post(url, {"op": "revoke", "grant_id": grant_id})
    ev = AuditEvent.objects.filter(org=a.org, action="acl.revoke", object_id=str(asset.id)).latest("id")
    assert ev.detail["grantee"] == key
