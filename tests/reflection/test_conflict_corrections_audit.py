"""The conflict rules (the no-LLM default) on the misses of a retrieval audit of a team's month of
memory: a price corrected and a deploy freeze moved were no conflict, so agents were served the stale
value first.

1. A value, then after ", not" the value it gives up ("finance wants the Pro plan at $39 per seat, not
   $35"), against a statement giving the same thing (the same words before its value) the value given
   up. ", not X" after a name was read as a contrast (``_gave_up``); after a value it was a negation,
   which no value rule reads. The contrast is what makes it a change: a wish without it ("finance wants
   the Pro plan at $39") names no old value; a proposal ("proposed", "might") changes nothing.
2. A period given "now" for the same thing ("The deploy freeze runs from Nov 20 through Nov 30" vs
   "The freeze now runs from Nov 24 to Dec 2") is rescheduled. The reschedule rule read single dates:
   a month written short ("Nov", "Dec") was a word of the thing and no day, the period's words
   ("runs from", "through", "inclusive") too; a clause ran over its text's sentences ("... Dec 2
   inclusive. Deploys on Nov 20-23 are allowed again.") and past ", so the freeze ..."; and a ban over
   the period ("no production deploys from Friday Nov 20 through Monday Nov 30") was a negation, which
   the rule skips. A "no" of one day ("No standup on Friday") still denies.

Every pair is checked in both directions.
"""

from __future__ import annotations

import pytest

from reflection.heuristics import statement

from .pairs import both_conflict as _both_conflict
from .pairs import both_none as _both_none

# ------------------------------------------------------------------ 1. a value, not the one given up
PRICE = "The Pro plan is $35 per seat."
APPROVED = ("Pricing change approved: the Pro plan goes from $29 to $35 per seat per month starting January 1, "
            "2027. The Team plan stays at $99 flat.")
CORRECTED = ("Also a correction on pricing: finance wants the Pro plan at $39 per seat, not $35. "
             "Starts January 1 as planned.")


@pytest.mark.parametrize("a,b", [
    (PRICE, "Finance wants the Pro plan at $39 per seat, not $35."),
    (APPROVED, CORRECTED),
    # ours
    (APPROVED, "Finance wants the Pro plan at $39 per seat, not $35."),
    ("The Pro plan costs $35 per seat.", "The Pro plan is $39 per seat, not $35."),
    ("The price of the Pro plan is $35 per seat.", "Correction: the Pro plan is $39, not $35."),
    ("The ads budget is 40k.", "Correction: the ads budget is 25k, not 40k."),
    ("The Pro plan is $35 per month.", "The Pro plan is $420 per year, not $35 per month."),
    ("The Team plan stays at $99 flat.", "Sales says the Team plan is $129 flat, not $99."),
    ("Our referral bonus is 500 EUR.", "HR set the referral bonus at 750, not 500."),
    ("The Pro plan is $35 per seat and the Team plan is $99.", "The Team plan is $129, not $99."),
])
def test_a_value_given_instead_of_the_other_conflicts(a, b):
    _both_conflict(a, b, ("changed value:", "different number"))


@pytest.mark.parametrize("a,b", [
    # another thing's value: another plan, a discount of the plan, a lunch
    (PRICE, "Finance wants the Team plan at $39 per seat, not $35."),
    ("The Pro plan discount is $35 per seat.", "Finance wants the Pro plan at $39 per seat, not $35."),
    ("The discount for the Pro plan is $35 per seat.", "Finance wants the Pro plan at $39 per seat, not $35."),
    ("Lunch for the offsite costs $35 per person.", "Finance wants the Pro plan at $39 per seat, not $35."),
    ("The Pro plan is $35 per seat and the Team plan is $99.", "The Team plan is $129, not $35."),
    ("The error budget is 40k.", "Correction: the ads budget is 25k, not 40k."),
    # a wish naming no old value; a proposal
    (PRICE, "Finance wants the Pro plan at $39 per seat."),
    (PRICE, "Finance proposed the Pro plan at $39 per seat, not $35."),
    (PRICE, "We might price the Pro plan at $39 per seat, not $35."),
    # the contrast of a name, of a unit, not of a value
    (PRICE, "The Team plan stays at $99 flat, not the Pro plan."),
    (PRICE, "The Pro plan is $35 per seat per year, not per month."),
    # other units; another currency
    ("The Pro plan is $35 per year.", "Finance wants the Pro plan at $39 per seat, not $35."),
    (PRICE, "The Pro plan is $420 per year, not $35 per month."),
    (PRICE, "Finance wants the Pro plan at \u20ac39 per seat, not \u20ac35."),
    # the value given up as the old one of a change, or denied
    ("The Pro plan goes from $29 to $35 per seat.", "Finance wants the Pro plan at $35 per seat, not $29."),
    ("The Pro plan is not $35 per seat.", "Finance wants the Pro plan at $39 per seat, not $35."),
    # the same value, the contrast restated
    ("The Pro plan is $39 per seat, not $35.", "The Pro plan is $39 per seat."),
])
def test_a_value_contrast_of_another_thing_conflicts_with_nothing(a, b):
    _both_none(a, b)


def test_a_value_contrast_is_no_negation():
    st = statement("Finance wants the Pro plan at $39 per seat, not $35.")
    assert not st.negated and st.numbers == {"39"}
    # a name's contrast neither; a plain denial still is one
    assert not statement("We deploy the frontend with Vercel, not Netlify.").negated
    assert statement("The Pro plan is not $35 per seat.").negated


# ------------------------------------------------------------------ 2. a period given "now"
FREEZE = "The deploy freeze runs from Nov 20 through Nov 30."
BLACK_FRIDAY = ("Black Friday deploy freeze: no production deploys from Friday Nov 20 through Monday Nov 30. "
                "Hotfixes only with Ana's sign-off.")
MOVED = ("Update on the code freeze: marketing moved the Cyber Monday campaign, so the freeze now runs from "
         "Tuesday Nov 24 to Wednesday Dec 2 inclusive. Deploys on Nov 20-23 are allowed again.")


@pytest.mark.parametrize("a,b", [
    (FREEZE, "The freeze now runs from Nov 24 to Dec 2."),
    (BLACK_FRIDAY, MOVED),
    # ours
    (FREEZE, MOVED),
    (BLACK_FRIDAY, "The freeze now runs from Tuesday Nov 24 to Wednesday Dec 2."),
    (FREEZE, "Update: the deploy freeze now runs from Nov 24 through Dec 2."),
    ("The code freeze is from December 14 to January 4.", "The code freeze now runs from December 7 to January 4."),
    ("The freeze runs Nov 20-30.", "The freeze now runs Nov 24-Dec 2."),
    ("The offsite is between May 4 and May 6.", "The offsite is now between May 11 and May 13."),
    ("No deploys from Nov 20 through Nov 30: the Black Friday freeze.",
     "The Black Friday freeze now runs from Nov 24 to Dec 2."),
    (FREEZE, "We moved the deploy freeze to Nov 24 through Dec 2."),
    ("The launch is on Nov 20.", "We moved the launch to Nov 24."),
])
def test_a_period_given_now_is_rescheduled(a, b):
    _both_conflict(a, b, "rescheduled:")


@pytest.mark.parametrize("a,b", [
    # another thing's period, a scope of the thing, the same period
    ("The holiday break runs from Dec 20 through Jan 2.", "The freeze now runs from Nov 24 to Dec 2."),
    ("No marketing emails from Nov 20 through Nov 30.", "The freeze now runs from Nov 24 to Dec 2."),
    (FREEZE, "The freeze for the mobile app now runs from Nov 24 to Dec 2."),
    (FREEZE, "The deploy freeze now runs from Nov 20 through Nov 30."),
    # proposed, conditional, denied
    (FREEZE, "We might move the freeze so it runs from Nov 24 to Dec 2."),
    (FREEZE, "If marketing moves the campaign, the freeze now runs from Nov 24 to Dec 2."),
    (FREEZE, "The freeze is not from Nov 24 to Dec 2."),
    ("The freeze no longer runs from Nov 20 through Nov 30.", "The freeze now runs from Nov 24 to Dec 2."),
    # a "no" of one day denies it; no change said
    ("No standup on Friday.", "The standup moved to Monday."),
    ("No standups from Dec 24 through Jan 2.", "The retro now is on Dec 28."),
    (FREEZE, "Deploys on Nov 20-23 are allowed again."),
    # two weeks of a rota, two holders
    ("Chen is on call Nov 9-15.", "Bruno is now on call Nov 16-22."),
])
def test_a_period_of_another_thing_or_not_changed_conflicts_with_nothing(a, b):
    _both_none(a, b)
