"""The changed-value rule: one side says a thing's value changed, the other gives the same thing
another value. A code review found it flagged pairs about other things (another job's timeout,
students' ticket price, a review's time, another year's plan, a refused change) and missed
changes worded with an object ("we cut the ads budget to 25k") or an old value ("from 40k to 25k")."""

from __future__ import annotations

import pytest

from memory.engine.text import extract_entities
from reflection.heuristics import conflict_reason


def _reason(a: str, b: str) -> str | None:
    return conflict_reason(a, b, extract_entities(a), extract_entities(b))


@pytest.mark.parametrize("a, b", [
    ("Ads budget cut to 25k", "We reviewed the ads budget with finance at 14:00 on March 3."),
    ("Ads budget cut to 25k", "Dana owns the ads budget since 2024"),
    ("Ads budget cut to 25k", "Ads budget review moved to 15:00 tomorrow"),
    ("API timeout is now 30 seconds", "API timeout for the nightly batch jobs is 300 seconds"),
    ("Ticket price went up to $12", "Ticket price for students is $8"),
    ("Disk usage on db-1 went up to 85%", "Disk usage on db-2 is 40%"),
    ("Headcount plan for 2027 was raised to 12 engineers", "Headcount plan for 2026 is 8 engineers"),
    ("Ads budget raised to 50k for April", "Ads budget for March is 40k"),
    ("Test coverage went up to 81%", "Test coverage must stay above 75%"),
    ("Deploy freeze set to 18:00 Friday", "Deploy freeze lasts 48 hours"),
    ("The cache TTL was reduced to 60 seconds", "The cache TTL for images is 1 day"),
    ("Max retries set to 5", "Max retries for webhooks is 3"),
    ("Our on-call rotation changed to 2 weeks", "The on-call rotation page is at wiki/ops/42"),
    ("Ads budget cut to 25k was rejected by the CFO", "Ads budget is 40k"),
    ("Understood, I'll prepare the ad plan within 40k EUR.", "Correction: Q1 paid ads budget is cut to 25k EUR."),
])
def test_other_things_values_are_no_change(a, b):
    assert _reason(a, b) is None


@pytest.mark.parametrize("a, b, old, new", [
    ("Budget for paid ads in Q1 is 40k EUR.", "Correction: Q1 paid ads budget is cut to 25k EUR after the review.",
     "40k", "25k"),
    ("My locker code is 4417.", "My locker code changed to 9021.", "4417", "9021"),
    ("The ads budget is 40k.", "We cut the ads budget to 25k.", "40k", "25k"),
    ("The ads budget is 40k EUR.", "The ads budget was cut from 40k EUR to 25k EUR.", "40k", "25k"),
    ("The ads budget is 40k.", "The ads budget was reduced by 15k to 25k.", "40k", "25k"),
    ("Max retries for webhooks is 3.", "Max retries for webhooks set to 5.", "3", "5"),
])
def test_a_changed_value_is_a_conflict(a, b, old, new):
    for x, y in ((a, b), (b, a)):
        reason = _reason(x, y)
        assert reason and reason.endswith(f"{old} vs {new}"), reason
