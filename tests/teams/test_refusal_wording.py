"""The org-admin refusals read as sentences ("Only organisation admins may read the audit log."),
not "…may perform reading the audit log." / "…may perform export" as before."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db

SENTENCE = re.compile(r"^Only organisation admins may [a-z][a-z' ]+[a-z]\.$")


def _message(r) -> str:
    assert r.status_code == 403, r.content
    return r.json()["error"]["message"]


def test_every_refusal_is_a_sentence(world, client_for):
    a = world["a"]
    member = client_for(a.member)
    calls = [
        member.get("/api/v1/audit"),
        member.get("/api/v1/export"),
        member.get("/api/v1/invitations"),
        member.post("/api/v1/teams", {"name": "x"}, format="json"),
        member.post("/api/v1/agents", {"name": "x"}, format="json"),
        member.patch(f"/api/v1/agents/{a.agent.id}", {"description": "x"}, format="json"),
        member.patch(f"/api/v1/members/{a.admin.id}", {"role": "member"}, format="json"),
        member.patch("/api/v1/org", {"name": "x"}, format="json"),
    ]
    messages = [_message(r) for r in calls]
    for m in messages:
        assert SENTENCE.match(m) and "perform" not in m, m
    assert "Only organisation admins may read the audit log." in messages
    assert "Only organisation admins may export the organisation's memory." in messages
    assert "Only organisation admins may manage invitations." in messages


def test_the_console_says_it_too(world):
    from django.test import Client

    c = Client()
    c.force_login(world["a"].member)
    r = c.get("/console/audit/")
    assert r.status_code == 403
    assert "Only organisation admins may read the audit log." in r.content.decode().replace("&#x27;", "'")
