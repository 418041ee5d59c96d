"""Conflict rules on ordinary paraphrases and plain contradictions (the no-LLM default)."""

from __future__ import annotations

import pytest

from reflection.heuristics import conflict_reason

B = ("Berlin",)


@pytest.mark.parametrize("a,b,ea,eb", [
    # third-person heuristic facts: "eats" and "doesn't eat" are one verb
    ("Alice eats meat.", "Alice doesn't eat meat.", (), ()),
    # "can't" is "can not", not "ca not"
    ("I can swim", "I can't swim", (), ()),
    ("I will go to the party", "I won't go to the party", (), ()),
    # chat spelling without the apostrophe still denies
    ("Alice eats meat.", "Alice dont eat meat.", (), ()),
    # a plain move-away with no shared wording
    ("I live in Berlin", "I moved away from Berlin", B, B),
    ("Alice works at Google.", "Alice quit Google.", ("Alice", "Google"), ("Alice", "Google")),
    # a denial of a statement made with more detail
    ("We deploy on Fridays at 14:00 UTC after the freeze ends.", "We never deploy on Fridays.", (), ()),
    ("Alice doesn't eat meat.", "Alice eats meat at family dinners.", (), ()),
    # the same named thing with another number
    ("Release v2 ships on May 3", "Release v2 ships on May 9", (), ()),
    # what a system runs vs a stated move of the same system to another version, in other words
    ("Production runs Postgres 15.", "We migrated production to Postgres 16.", ("Production", "Postgres"),
     ("Postgres",)),
    ("The staging Redis cluster runs Redis 6.2.", "We upgraded the staging Redis cluster to Redis 7.4 yesterday.",
     ("Redis",), ("Redis",)),
    ("we're on postgres 15 in production", "we moved production to postgres 16 last night", (), ()),
    ("The production database is Postgres 15.", "We migrated production to Postgres 16 last night.", (), ()),
])
def test_plain_contradictions_are_found(a, b, ea, eb):
    assert conflict_reason(a, b, ea, eb) is not None


@pytest.mark.parametrize("a,b,ea,eb", [
    ("I have 2 kids", "I have two kids", (), ()),
    ("I am twenty five years old", "I am 25 years old", (), ()),
    ("I moved to Berlin in 2020", "I moved to Berlin in May 2020", B, B),
    ("I live in Berlin", "I live in Berlin, Germany", B, ("Berlin", "Germany")),
    ("I live in Berlin", "I left my keys in Berlin", B, B),
    ("I live in Berlin", "I lived in Berlin", B, B),
    # two things with their own names, not one statement with two numbers
    ("Bulk memory 29 about topic db and the release plan v29",
     "Bulk memory 59 about topic db and the release plan v59", (), ()),
    ("The nightly build b1042 of the payments service failed at 3pm",
     "The nightly build b1043 of the payments service failed at 5pm", (), ()),
    # a move of another system, a move not made, a move to the version it runs, a fact about a version
    ("Staging runs Postgres 15.", "We migrated production to Postgres 16.", ("Staging", "Postgres"), ("Postgres",)),
    ("Production runs Postgres 15.", "We haven't migrated production to Postgres 16.", ("Postgres",), ("Postgres",)),
    ("Production runs Postgres 15.", "We migrated production to Postgres 15 last week.", ("Postgres",), ("Postgres",)),
    ("Production runs Postgres 15.", "Postgres 16 adds logical replication of sequences.", ("Postgres",), ("Postgres",)),
    ("The staging database is Postgres 15.", "We migrated production to Postgres 16.", (), ()),
    ("Postgres 16 is out.", "We migrated production to Postgres 16.", (), ()),
    # a short denial is contained in too much to deny it
    ("I don't know", "I know where the meeting is", (), ()),
    # the claim says much more than the denial denies
    ("I never go to the gym", "I go to the gym with Ana on Mondays to swim and then eat", (), ()),
])
def test_paraphrases_and_refinements_are_no_conflict(a, b, ea, eb):
    assert conflict_reason(a, b, ea, eb) is None
