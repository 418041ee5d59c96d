"""The console's date filters (memory browser, audit log): "until" includes its whole day, and the
calendar's ends (0001-01-01, 9999-12-31 — both offered by the date picker) are a 200, not a 500
from adding a day past ``date.max``."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from assets.models import AuditEvent
from frontend.forms import day_end, day_start
from memory.models import Node

from .test_pages import node_ids_in

pytestmark = pytest.mark.django_db

EDGES = ["until=9999-12-31", "since=0001-01-01", "since=0001-01-01&until=9999-12-31",
         "since=9999-12-31&until=9999-12-31", "since=0001-01-01&until=0001-01-01"]


def _at(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.fixture
def days(world, mem):
    """Memories and audit entries on 10 May 2024 (first and last instant) and on the 11th (first
    instant): the boundary an inclusive "until 2024-05-10" must fall on."""
    Node.objects.filter(id=mem.member_private).update(occurred_at=_at(2024, 5, 10))
    Node.objects.filter(id=mem.owner_org).update(occurred_at=_at(2024, 5, 10, 23, 59, 59, 999999))
    Node.objects.filter(id=mem.agent_org).update(occurred_at=_at(2024, 5, 11))
    org = world["a"].org
    for action, when in (("test.day10-first", _at(2024, 5, 10)),
                         ("test.day10-last", _at(2024, 5, 10, 23, 59, 59, 999999)),
                         ("test.day11-first", _at(2024, 5, 11))):
        e = AuditEvent.objects.create(org=org, actor_kind="system", actor_label="system", action=action,
                                      object_type="x", object_id="1")
        AuditEvent.objects.filter(id=e.id).update(created_at=when)  # created_at is auto_now_add
    return mem


@pytest.mark.parametrize("query", EDGES)
def test_memory_browser_accepts_the_calendar_ends(query, world, days, login):
    r = login(world["a"].member).get(f"/console/memories/?{query}")
    assert r.status_code == 200
    ids = node_ids_in(r.content.decode())
    visible = {days.member_private, days.member_team, days.owner_org, days.agent_org}
    if "until=0001-01-01" in query or "since=9999-12-31" in query:
        assert ids == set()
    else:
        assert ids == visible  # an unbounded end filters nothing out


@pytest.mark.parametrize("query", EDGES)
def test_audit_log_accepts_the_calendar_ends(query, world, days, login):
    r = login(world["a"].admin).get(f"/console/audit/?action=test.&{query}")
    assert r.status_code == 200
    html = r.content.decode()
    shown = {a for a in ("test.day10-first", "test.day10-last", "test.day11-first") if a in html}
    if "until=0001-01-01" in query or "since=9999-12-31" in query:
        assert shown == set()
    else:
        assert shown == {"test.day10-first", "test.day10-last", "test.day11-first"}


def test_memory_browser_until_includes_its_day_and_not_the_next(world, days, login):
    c = login(world["a"].member)
    ids = node_ids_in(c.get("/console/memories/?until=2024-05-10").content.decode())
    assert ids == {days.member_private, days.owner_org}
    ids = node_ids_in(c.get("/console/memories/?since=2024-05-11&until=2024-05-11").content.decode())
    assert ids == {days.agent_org}
    ids = node_ids_in(c.get("/console/memories/?since=2024-05-10&until=2024-05-10").content.decode())
    assert ids == {days.member_private, days.owner_org}


def test_audit_until_includes_its_day_and_not_the_next(world, days, login):
    c = login(world["a"].admin)
    html = c.get("/console/audit/?action=test.&until=2024-05-10").content.decode()
    assert "test.day10-first" in html and "test.day10-last" in html and "test.day11-first" not in html
    html = c.get("/console/audit/?action=test.&since=2024-05-11&until=2024-05-11").content.decode()
    assert "test.day11-first" in html and "test.day10" not in html


def test_day_bounds():
    assert day_start(None) is None and day_end(None) is None
    assert day_start(date.min) is None and day_end(date.max) is None  # nothing is earlier / later
    assert day_start(date(2024, 5, 10)) == _at(2024, 5, 10)
    assert day_end(date(2024, 5, 10)) == _at(2024, 5, 11)
    assert day_end(date(2024, 12, 31)) == _at(2025, 1, 1)
    assert day_end(date(9999, 12, 30)) == _at(9999, 12, 31)
