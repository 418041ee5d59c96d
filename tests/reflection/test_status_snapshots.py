"""A recurring status line's counts ("Board: 7 tickets in progress, 2 blocked." one day, "9 … 3
blocked" the next) are that day's tally, not a contradiction: a re-audit's open conflicts were 30
board snapshots of 33. A setting's value, a version or a time that changes is still one."""

from __future__ import annotations

import pytest

from reflection import conflicts
from reflection.heuristics import only_counts_differ
from reflection.models import Conflict

from .helpers import weave

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("a,b,counts", [
    ("Board: 7 tickets in progress, 2 blocked.", "Board: 9 tickets in progress, 3 blocked.", True),
    ("Sprint burndown is on track, 21 of 34 points done.", "Sprint burndown is on track, 28 of 34 points done.", True),
    ("CI: 12 tests failing, 3 flaky.", "CI: 4 tests failing, 3 flaky.", True),
    ("Production runs Postgres 15.", "Production runs Postgres 16.", False),
    ("We deploy at 14:00.", "We deploy at 16:00.", False),
    ("We run 3 replicas.", "We run 5 replicas.", False),
    ("Rate limit is 500 requests per minute.", "Rate limit is 1000 requests per minute.", False),
    ("The API allows 500 requests a minute.", "The API allows 1000 requests a minute.", False),
    ("The cutover is on December 4.", "The cutover is on December 9.", False),
    ("Board: 7 tickets in progress.", "Board: 7 tickets in progress.", False),  # nothing differs
])
def test_only_counts_differ(a, b, counts):
    assert only_counts_differ(a, b) is counts


def _say(client, text: str, day: str, key: str) -> int:
    turns = [{"speaker": "bot", "text": text, "occurred_at": f"2026-11-{day}T09:00:00Z"}]
    return weave(client, key, turns=turns, end=False, visibility="org")["node_ids"][0]


def test_daily_board_lines_are_not_conflicts_but_a_changed_setting_is(world, client_for, no_llm):
    a = world["a"]
    c = client_for(a.key)
    _say(c, "Board: 7 tickets in progress, 2 blocked.", "24", "b1")
    later = _say(c, "Board: 9 tickets in progress, 3 blocked.", "25", "b2")
    assert conflicts.detect(org_id=a.org.id, node_ids=[later]) == 0
    _say(c, "The API rate limit is 500 requests per minute.", "24", "r1")
    changed = _say(c, "The API rate limit is 1000 requests per minute.", "25", "r2")
    assert conflicts.detect(org_id=a.org.id, node_ids=[changed]) == 1
    assert Conflict.objects.count() == 1
