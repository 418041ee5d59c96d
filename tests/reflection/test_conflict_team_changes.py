"""The conflict rules (the no-LLM default) on changes a team's memory states in other words than the
statement they change: a retrieval audit stored no conflict for a release freeze moved "for the SOC2
audit", a database dropped "instead", a customer that "now wants" another currency, an "acting
owner", so agents were given the old value first with nothing marking it disputed."""

from __future__ import annotations

import pytest

from memory.engine.text import extract_entities
from reflection.heuristics import conflict_reason


def _reason(a: str, b: str) -> str | None:
    return conflict_reason(a, b, extract_entities(a), extract_entities(b))


# ------------------------------------------------------------------ letters and digits, "now"
@pytest.mark.parametrize("a,b", [
    # "Q4", "SOC2", "H2", "ISO27001" are detail of one side, not the names of two things
    ("The Q4 release freeze starts December 14.",
     "Update: the release freeze now starts December 7 for the SOC2 audit."),
    ("The H2 planning review is on June 12.", "Heads up: the planning review now happens on June 19 for the ISO27001 prep."),
    # "now" gives a date as the current one, in place of the other's
    ("Code freeze for v3 begins Friday.", "Code freeze for v3 now begins Monday."),
    ("Initech's renewal call is on the 12th.", "Initech's renewal call is now on the 15th."),
    # "due" and "deadline" say the same: a date of the review
    ("The security review is due November 29.", "The security review deadline is now December 6."),
])
def test_a_date_given_now_contradicts_the_date_it_replaces(a, b):
    for x, y in ((a, b), (b, a)):
        reason = _reason(x, y)
        assert reason and reason.startswith(("rescheduled: ", "different number or date")), reason


@pytest.mark.parametrize("a,b", [
    # two identifiers of one sort, or beside the same word: two things
    ("The SOC2 audit starts March 3.", "The ISO27001 audit starts March 10."),
    ("The Q4 release freeze starts December 14.", "The Q1 release freeze starts March 2."),
    ("The us-east-1 cluster has 12 nodes.", "The eu-west-1 cluster has 8 nodes."),
    # what follows the new date is its occasion, not the thing moved
    ("Update: the release freeze now starts December 7 for the SOC2 audit.", "The SOC2 audit starts March 3."),
    # a move only weighed or proposed moves nothing
    ("The launch is on March 3.", "We could move the launch to March 10."),
    ("The GA launch is on May 20.", "Ana proposed moving the GA launch to June 3."),
    # "now" of a number that is no date, and "for now"
    ("API timeout is now 30 seconds", "API timeout for the nightly batch jobs is 300 seconds"),
    ("For now the billing demo stays on Friday.", "The billing retro is on Monday."),
])
def test_other_things_and_moves_not_made_are_no_conflict(a, b):
    assert _reason(a, b) is None and _reason(b, a) is None


# ------------------------------------------------------------------ no subject named, weekly days
@pytest.mark.parametrize("a,b", [
    # neither side names a subject beside the thing: one subject, the writer's own
    ("We use Postgres 15.", "We moved to Postgres 16."),
    ("I use Python 3.11.", "I moved to Python 3.12."),
    # a weekly day, said in the plural, moved
    ("Deploys happen on Tuesdays.", "Deploys moved to Thursdays."),
    ("The team sync is on Mondays.", "The team sync was moved to Wednesdays."),
])
def test_a_change_without_a_named_subject_or_to_a_weekly_day_conflicts(a, b):
    assert _reason(a, b) is not None


@pytest.mark.parametrize("a,b", [
    # only one side names a subject: maybe a narrower statement, not the same one
    ("We use Postgres 15 for analytics.", "We moved to Postgres 16."),
    ("We use Postgres 15.", "Globex moved to Postgres 16."),
    ("We use Python 3.11.", "We moved the scripts to Python 3.12."),
    # another thing moved to the weekly day
    ("Standups happen on Mondays.", "The retro moved to Thursdays."),
    ("Office hours are on Fridays.", "We moved the demo to Fridays."),
])
def test_another_subject_or_another_thing_moved_is_no_conflict(a, b):
    assert _reason(a, b) is None


# ------------------------------------------------------------------ a verb counting, not a run number
@pytest.mark.parametrize("a,b", [
    ("Staging runs 3 replicas.", "Staging now runs 5 replicas."),
    ("CI builds 4 images per commit.", "CI builds 6 images per commit."),
])
def test_a_count_after_a_verb_that_is_also_a_series_noun_is_a_value(a, b):
    assert _reason(a, b) is not None


@pytest.mark.parametrize("a,b", [
    ("Run 3 failed on staging.", "Run 4 failed on staging."),  # two runs
    ("Runs 3 and 4 failed on staging.", "Runs 5 and 6 failed on staging."),
    ("Staging runs 3 replicas.", "Production runs 8 replicas."),  # two environments
])
def test_run_numbers_and_other_subjects_stay_apart(a, b):
    assert _reason(a, b) is None
