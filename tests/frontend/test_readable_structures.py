"""The console shows stored structures as text people read, never a Python repr: a node's time
references ("9 January 2027", not "{'end': '2027-01-09', …}") and the audit log's Detail column
("grantee user:4 · permission read", not "{'grantee': 'user:4', …}")."""

from __future__ import annotations

import html

import pytest

from assets.models import AuditEvent
from frontend.templatetags.console_format import audit_detail, time_ref
from memory import services
from teams.auth import actor_for_user

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("ref, shown", [
    ({"surface": "9 January 2027", "start": "2027-01-09", "end": "2027-01-09", "granularity": "day"},
     "9 January 2027"),
    ({"surface": "yesterday", "start": "2026-11-30", "end": "2026-11-30", "granularity": "day"},
     "“yesterday”: 30 November 2026"),
    ({"surface": "next week", "start": "2026-12-07", "end": "2026-12-13", "granularity": "week"},
     "“next week”: 7–13 December 2026"),
    ({"surface": "in March 2027", "start": "2027-03-01", "end": "2027-03-31", "granularity": "month"},
     "“in March 2027”: March 2027"),
    ({"surface": "2027", "start": "2027-01-01", "end": "2027-12-31", "granularity": "year"}, "2027"),
    ({"surface": "the winter", "start": "2026-12-21", "end": "2027-03-20", "granularity": "season"},
     "“the winter”: 21 December 2026 – 20 March 2027"),
    ({"surface": "odd", "start": "not a date"}, "odd"),
])
def test_time_ref(ref, shown):
    assert time_ref(ref) == shown


def test_audit_detail():
    assert audit_detail({"grantee": "user:4", "permission": "read", "self_grant": False}) == \
        "grantee user:4 · permission read · self grant no"
    assert audit_detail({"revoked_keys": [], "to_team": None, "nodes": {"shared": 1, "other": 0}}) == \
        "revoked keys — · to team — · nodes (shared 1 · other 0)"
    assert audit_detail({"ids": list(range(15))}) == "ids 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 3 more"
    assert audit_detail({}) == "" and audit_detail(None) == ""
    # times as the log's other times read, not ISO with microseconds
    assert audit_detail({"requested_at": "2026-12-01T04:33:16.728801+00:00"}) == "requested at 2026-12-01 04:33 UTC"
    assert audit_detail({"at": "2026-12-01T04:33"}) == "at 2026-12-01 04:33"
    assert audit_detail({"note": "2026-12-01 is the day"}) == "note 2026-12-01 is the day"


def test_a_long_audit_detail_can_be_read_whole(world, login):
    from assets import audit

    a = world["a"]
    audit.record(actor=None, org=a.org, action="team.delete", object_type="team", object_id=1,
                 detail={"moved": list(range(10)), "note": "x" * 300})
    html = login(a.owner).get("/console/audit/").content.decode()
    assert "<details><summary>" in html and "x" * 300 in html


def test_the_pages_show_them_readably(world, login):
    a = world["a"]
    owner = actor_for_user(a.owner, a.org)
    node = services.weave_session(actor=owner, visibility="org", turns=[
        services.TurnIn(text="The migration ships on 9 January 2027.")]).node_ids[0]
    AuditEvent.objects.create(org=a.org, action="acl.grant", object_type="node", object_id=str(node),
                              actor_label="user:alpha-owner",
                              detail={"grant_id": 3, "grantee": "user:4", "permission": "read", "self_grant": False})
    c = login(a.owner)
    body = html.unescape(c.get(f"/console/memories/{node}/").content.decode())
    assert "9 January 2027" in body and "{'" not in body and "'end'" not in body
    body = html.unescape(c.get("/console/audit/?action=acl.grant").content.decode())
    # (jsonb keeps its keys shortest first)
    assert "grantee user:4 · grant id 3 · permission read · self grant no" in body
    assert "{'grantee'" not in body
