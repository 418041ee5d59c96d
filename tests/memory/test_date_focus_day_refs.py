"""The date focus ("What did Ben fix on November 19?") took only the memories written that day:
"Yesterday I fixed the webhook retry bug", written on the 20th with its "yesterday" resolved and
stored (``time_refs``: 2026-11-19), got no date rank, and an unrelated line written on the 19th came
first. A memory whose text refers to days inside the named ones is of those days too: the cache
reads the stored references into the index, and each catch-up keeps them current."""

from __future__ import annotations

import pytest

from memory.cache import _day_refs, get_cache
from memory.models import Node

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]

TURNS = [
    {"speaker": "Ben", "text": "Lunch order is in, pizza again. Did someone fix the coffee machine?",
     "occurred_at": "2026-11-19T12:00:00Z"},
    {"speaker": "Ben", "text": "The design review of the new onboarding flow went well.",
     "occurred_at": "2026-11-19T15:00:00Z"},
    {"speaker": "Ben", "text": "Yesterday I fixed the webhook retry bug.", "occurred_at": "2026-11-20T09:00:00Z"},
    {"speaker": "Ana", "text": "I fixed the flaky login test today.", "occurred_at": "2026-11-21T09:00:00Z"},
]


def _hits(client, query: str) -> list[dict]:
    r = client.post("/api/v1/memories/resonate", {"query": query, "k": 4, "reinforce": False}, format="json")
    assert r.status_code == 200, r.content
    return r.json()["hits"]


def test_a_memory_that_says_it_happened_on_the_named_day_comes_first(world, client_for):
    c = client_for(world["a"].key)
    for i, t in enumerate(TURNS):
        r = c.post("/api/v1/memories/weave-session", {"session_key": f"eng-{i}", "turns": [t], "visibility": "org"},
                   format="json")
        assert r.status_code == 201, r.content
    fixed = Node.objects.get(org=world["a"].org, text__startswith="Yesterday I fixed")
    assert fixed.time_refs[0]["start"] == "2026-11-19"  # the premise: stored as written
    hits = _hits(c, "What did Ben fix on November 19?")
    assert hits[0]["node_id"] == fixed.id, [(h["node_id"], h["text"]) for h in hits]
    assert hits[0]["explanation"]["channels"]["date"] is not None
    # a reference that changes (an edited row) is read again by the next catch-up
    Node.objects.filter(pk=fixed.pk).update(time_refs=[{"start": "2026-11-18", "end": "2026-11-18",
                                                        "surface": "Wednesday", "granularity": "day"}])
    hits = _hits(c, "What did Ben fix on November 19?")
    assert {h["node_id"]: h["explanation"]["channels"]["date"] for h in hits}.get(fixed.id) is None
    hits = _hits(c, "What did Ben fix on November 18?")
    assert hits[0]["node_id"] == fixed.id and hits[0]["explanation"]["channels"]["date"] is not None
    index = get_cache().peek(world["a"].org.id)
    assert index is not None and index.day_refs()[0].size == 2  # "yesterday" and Ana's "today": one each


def test_stored_references_that_are_not_dates_are_skipped():
    good = {"start": "2026-11-19", "end": "2026-11-19", "surface": "yesterday", "granularity": "day"}
    assert _day_refs([good]) == ((20776, 20776),)
    assert _day_refs([{"start": "2026-11-16", "end": "2026-11-22"}]) == ((20773, 20779),)
    assert _day_refs([{"start": "2026-11-19T10:00:00"}]) == ((20776, 20776),)  # no end: that day
    assert _day_refs(None) == () and _day_refs([]) == () and _day_refs({"start": "2026-11-19"}) == ()
    junk = [None, 3, "x", {}, {"start": None}, {"start": "soon"}, {"start": 20776}, {"start": "2026-02-30"}]
    assert _day_refs(junk + [good]) == ((20776, 20776),)


def _day(d) -> str:
    return f"{d.day} {d:%B %Y}"


def test_a_day_not_yet_over_takes_what_was_planned_for_it(world, client_for):
    """ "What is planned on 15 December?" asked before the 15th: only a memory looking ahead to it can
    answer, and the day's own words are out of the lexical query, so it ranked tenth of ten. A day
    already over keeps to what was said of it on or after it (a plan is not what happened)."""
    from datetime import timedelta

    from django.utils import timezone

    today = timezone.now().date()
    ahead, gone = today + timedelta(days=13), today - timedelta(days=2)
    c = client_for(world["a"].key)
    turns = [
        {"speaker": "Hana", "text": f"The mobile app release 2.3 is scheduled for {ahead:%B} {ahead.day}.",
         "occurred_at": f"{today - timedelta(days=6)}T10:00:00Z"},
        {"speaker": "Ben", "text": f"The vendor demo is set for {gone:%B} {gone.day}.",
         "occurred_at": f"{today - timedelta(days=9)}T10:00:00Z"},
        {"speaker": "Ben", "text": "We migrated the billing database to Postgres 16 without downtime.",
         "occurred_at": f"{gone}T16:00:00Z"},
    ] + [{"speaker": "Ana", "text": f"Standup notes {i}: reviewed the backlog and the on-call handover.",
          "occurred_at": f"{today - timedelta(days=i)}T09:00:00Z"} for i in range(1, 8)]
    for i, t in enumerate(turns):
        r = c.post("/api/v1/memories/weave-session", {"session_key": f"plan-{i}", "turns": [t], "visibility": "org"},
                   format="json")
        assert r.status_code == 201, r.content
    plan = Node.objects.get(org=world["a"].org, text__startswith="The mobile app release")
    assert plan.time_refs[0]["start"] == str(ahead)  # the premise: the day it looks ahead to

    for asked in (_day(ahead), f"{ahead:%B} {ahead.day}"):  # with its year, and without (yearless)
        hits = _hits(c, f"What is planned on {asked}?")
        assert hits[0]["node_id"] == plan.id, (asked, [(h["node_id"], h["text"]) for h in hits])
        assert hits[0]["explanation"]["channels"]["date"] == 1

    demo = Node.objects.get(org=world["a"].org, text__startswith="The vendor demo")
    hits = _hits(c, f"What happened on {_day(gone)}?")
    dates = {h["node_id"]: h["explanation"]["channels"]["date"] for h in hits}
    migrated = Node.objects.get(org=world["a"].org, text__startswith="We migrated").id
    assert dates.get(migrated) is not None and dates.get(demo.id) is None

    # today is not over, but a plan for today is not what happened today
    r = c.post("/api/v1/memories/weave-session", {"session_key": "plan-today", "visibility": "org", "turns": [
        {"speaker": "Ben", "text": f"The invoice service cutover is planned for {today:%B} {today.day}, {today.year}.",
         "occurred_at": f"{today - timedelta(days=7)}T10:00:00Z"}]}, format="json")
    assert r.status_code == 201, r.content
    for_today = r.json()["node_ids"][0]
    dates = {h["node_id"]: h["explanation"]["channels"]["date"] for h in _hits(c, "What happened today?")}
    assert dates.get(for_today) is None
