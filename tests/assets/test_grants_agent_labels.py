"""``GET /api/v1/grants`` (an agent owning a restricted memory may list its ACL) handed the agent
``granted_by_label`` verbatim: ``user:<username>``, the full email address for an account named by
it. Agents see people without their addresses (docs/permissions.md): the grants list now names such
a granter by the address's local part to agent keys, and in full to people."""

from __future__ import annotations

import pytest

from tests.teams.invites import legacy_member

from .helpers import grant, weave

pytestmark = pytest.mark.django_db


def test_agent_listing_its_acl_sees_no_granters_address(world, client_for):
    a = world["a"]
    root = legacy_member(a.org, "root@corp.example", role="admin")
    bot = client_for(a.key)
    nid = weave(bot, "agent restricted note", visibility="restricted")
    # an org admin manages the ACL of any restricted object
    g = grant(client_for(root), "node", nid, grantee_kind="user", user_id=a.member.id)
    assert g["granted_by_label"] == "user:root@corp.example"  # to the person, in full

    r = bot.get(f"/api/v1/grants?object_type=node&object_id={nid}")
    assert r.status_code == 200, r.content
    assert "root@corp.example" not in r.content.decode()
    assert [x["granted_by_label"] for x in r.json()["results"]] == ["user:root"]
    # its own grant names itself
    g = grant(bot, "node", nid, grantee_kind="team_role", team_id=a.team.id)
    assert g["granted_by_label"] == f"agent:{a.agent.name}"
    r = client_for(root).get(f"/api/v1/grants?object_type=node&object_id={nid}")
    assert "user:root@corp.example" in [x["granted_by_label"] for x in r.json()["results"]]
