"""The conflict rules (the no-LLM default) on ordinary corrections a first-user audit wove a week
apart and found no conflict for, so agents were served the old value with nothing marking it
disputed:

1. a value changed by a verb ("cut", "shortened", "extended" ...) whose object carries a qualifier
   ("the ads budget for the launch campaign"): the object was read at most five words long;
2. an owner denied with a new owner given ("Ben does not own X anymore; Omar owns it now"), and a
   new owner given "now" for the project the thing belongs to ("... for Atlas now");
3. a date of one event in its verb and its noun form ("Atlas will launch on December 21" vs "The
   Atlas launch date is December 14");
4. a secret, code or setting "is now" another letters-and-digits value ("... is now orchid77");
5. an identifier that is the value of a named setting ("the X code is PX-7781" vs "... changed to
   PX-9902"), which was read as the name of a second thing (``_other_referents``).

Each kind has its negatives: other settings or campaigns, proposals, one person's preference against
another's, identifiers of two things, a status line's counts, another code's new value. Every pair is
checked in both directions.
"""

from __future__ import annotations

import pytest

from memory.engine.text import extract_entities
from reflection.heuristics import conflict_reason, only_counts_differ


def _reason(a: str, b: str) -> str | None:
    return conflict_reason(a, b, extract_entities(a), extract_entities(b))


def _verdict(a: str, b: str) -> str | None:
    """As ``reflection.conflicts.detect`` runs the rules on two memories days apart: a status line's
    counts are that day's report, excused before the rules."""
    if only_counts_differ(a, b):
        return None
    return _reason(a, b)


def _both_conflict(a: str, b: str, prefix: str | tuple[str, ...] = "") -> None:
    for x, y in ((a, b), (b, a)):
        reason = _reason(x, y)
        assert reason is not None, (x, y)
        assert reason.startswith(prefix), (x, y, reason)


def _both_none(a: str, b: str) -> None:
    for x, y in ((a, b), (b, a)):
        assert _verdict(x, y) is None, (x, y, _verdict(x, y))


# ------------------------------------------------------------------ the audit's pairs
AUDIT = [
    ("The ads budget for the launch campaign is 40k EUR.", "We cut the ads budget for the launch campaign to 25k EUR."),
    ("Ben owns the Stripe integration.", "Ben does not own the Stripe integration anymore; Omar owns it now."),
    ("Ben owns the Stripe integration.", "Omar owns the Stripe integration for Atlas now."),
    ("The refund window is 30 days.", "We shortened the refund window to 14 days."),
    ("Atlas will launch on December 21.", "The Atlas launch date is December 14."),
    ("The office wifi password is tulip42.", "The office wifi password is now orchid77."),
    ("The PagerDuty escalation code is PX-7781.", "The PagerDuty escalation code changed to PX-9902."),
]


@pytest.mark.parametrize("a,b", AUDIT)
def test_the_audits_corrections_conflict_both_ways(a, b):
    _both_conflict(a, b)


# ------------------------------------------------------------------ 1. a value-change verb and its object
@pytest.mark.parametrize("a,b,old,new", [
    ("The ads budget for the launch campaign is 40k EUR.", "We cut the ads budget for the launch campaign to 25k EUR.",
     "40k", "25k"),
    ("The refund window is 30 days.", "We shortened the refund window to 14 days.", "30", "14"),
    ("The free trial for the Pro plan is 14 days.", "We extended the free trial for the Pro plan to 30 days.",
     "14", "30"),
    ("The rate limit on the public search API is 100 requests per minute.",
     "We raised the rate limit on the public search API to 250 requests per minute.", "100", "250"),
    ("Session timeout in the admin console is 15 minutes.",
     "We lengthened the session timeout in the admin console to 60 minutes.", "15", "60"),
    # who made the change is not the thing changed
    ("The hiring budget for the data platform team is 200k.",
     "Finance lowered the hiring budget for the data platform team to 150k.", "200k", "150k"),
    ("The minimum order for wholesale accounts is 50 units.",
     "Sales reduced the minimum order for wholesale accounts to 20 units.", "50", "20"),
    ("The retention period for audit logs is 90 days.", "Legal increased the retention period for audit logs to 365 days.",
     "90", "365"),
    ("The weekly release cap is 3 deploys.", "We reset the weekly release cap to 5 deploys.", "3", "5"),
    ("The warehouse pool size is 8 workers.", "Ops moved the warehouse pool size to 12 workers.", "8", "12"),
    # the qualifier before the statement, as written on either side
    ("For the launch campaign, the ads budget is 40k EUR.",
     "For the launch campaign, we cut the ads budget to 25k EUR.", "40k", "25k"),
])
def test_a_value_changed_by_a_verb_conflicts_with_the_value_stated(a, b, old, new):
    for x, y in ((a, b), (b, a)):
        reason = _reason(x, y)
        assert reason and reason.startswith("changed value: ") and reason.endswith(f"{old} vs {new}"), (x, y, reason)


@pytest.mark.parametrize("a,b", [
    # two campaigns, two settings
    ("The ads budget for the launch campaign is 40k EUR.", "The ads budget for the holiday campaign is 25k EUR."),
    ("The ads budget for the launch campaign is 40k EUR.", "We cut the ads budget for the holiday campaign to 25k EUR."),
    ("The ads budget is 40k EUR.", "We cut the ads budget for the holiday campaign to 25k EUR."),
    ("The ads budget for the holiday campaign is 40k EUR.", "We cut the ads budget to 25k EUR."),
    ("The refund window is 30 days.", "We shortened the refund window for EU customers to 14 days."),
    ("The refund window for EU customers is 30 days.", "We shortened the refund window to 14 days."),
    ("The free trial for the Pro plan is 14 days.", "We extended the free trial for the Team plan to 30 days."),
    ("The session timeout is 15 minutes.", "We lengthened the password reset link expiry to 60 minutes."),
    ("The rate limit on the public search API is 100 requests per minute.",
     "We raised the burst limit on the public search API to 250 requests per minute."),
    # a change only proposed, weighed or asked for
    ("The ads budget is 40k EUR.", "We could cut the ads budget to 25k EUR."),
    ("The ads budget for the launch campaign is 40k EUR.",
     "Let's cut the ads budget for the launch campaign to 25k EUR."),
    ("The refund window is 30 days.", "Support proposed shortening the refund window to 14 days."),
    ("The refund window is 30 days.", "Priya asked us to shorten the refund window to 14 days."),
    ("The ads budget is 40k EUR.", "Ana wants the ads budget cut to 25k EUR."),
    # one person's preference against another's
    ("Ana prefers a 30-day refund window.", "Ben prefers a 14-day refund window."),
    ("Ana wants the standup at 9:30.", "Ben wants the standup at 10:15."),
    # a move to a place, not to a value
    ("The design review is in room 4.", "We moved the design review to the big room."),
])
def test_other_things_and_changes_not_made_are_no_changed_value(a, b):
    _both_none(a, b)


# ------------------------------------------------------------------ 2. one role: denied, handed on
@pytest.mark.parametrize("a,b", [
    ("Ben owns the Stripe integration.", "Ben does not own the Stripe integration anymore; Omar owns it now."),
    ("Priya owns the billing dashboard.", "Priya no longer owns the billing dashboard; Luis does now."),
    ("The checkout service is owned by Dana.", "Dana doesn't own the checkout service anymore. Kofi owns it."),
    ("Sam leads the mobile squad.", "Sam doesn't lead the mobile squad anymore; Nadia leads it now."),
    # a new owner given "now" for the project or customer the thing belongs to
    ("Ben owns the Stripe integration.", "Omar owns the Stripe integration for Atlas now."),
    ("Elena owns the SSO setup.", "Kenji now owns the SSO setup for Initech."),
])
def test_a_role_denied_or_given_anew_conflicts_with_its_other_holder(a, b):
    _both_conflict(a, b)


@pytest.mark.parametrize("a,b", [
    # another thing, another part of it
    ("Ben owns the Stripe integration.", "Omar owns the Adyen integration now."),
    ("Ben owns the Stripe integration.", "Omar owns the Stripe integration docs now."),
    ("Ben owns the Stripe integration.", "Ben does not own the Adyen integration anymore; Omar owns it now."),
    ("Ben owns the Stripe integration.", "Ben doesn't own the Stripe integration tests; Omar owns them."),
    # a narrower scope than a project's name is a part of the thing
    ("Ben owns the Stripe integration.", "Omar owns the Stripe integration for the EU region now."),
    # the new holder is the one the other side names
    ("Omar owns the Stripe integration.", "Ben does not own the Stripe integration anymore; Omar owns it now."),
    # a hand-over only weighed, another role
    ("Ben owns the Stripe integration.", "Omar might own the Stripe integration for Atlas next quarter."),
    ("Ben leads the Stripe integration.", "Ben doesn't own the Stripe integration anymore; Omar owns it now."),
    # two people's doings
    ("Ben reviewed the Stripe integration.", "Omar reviewed the Stripe integration for Atlas."),
    # a co-owner, another project's integration
    ("Ben owns the Stripe integration.", "Ben owns the Stripe integration with Omar now."),
    ("Ben owns the Stripe integration for Atlas.", "Omar now owns the Stripe integration for Orion."),
    ("Luis owns the checkout service now.", "Omar owns the checkout service docs."),
])
def test_no_second_holder_of_that_role_is_no_conflict(a, b):
    _both_none(a, b)


# ------------------------------------------------------------------ 3. one event's date, verb or noun
@pytest.mark.parametrize("a,b", [
    ("Atlas will launch on December 21.", "The Atlas launch date is December 14."),
    ("The Helios beta will ship on March 3.", "The Helios beta ship date is March 10."),
    ("The mobile app will release on Friday.", "The mobile app release is on Monday."),
    ("The Nova migration starts on June 2.", "The Nova migration start date is June 9."),
    ("Orion goes live on May 5.", "The Orion go-live is on May 12."),
    ("Atlas launches on December 21.", "The launch of Atlas is on December 14."),
    ("The partner portal is going to launch on April 8.", "The partner portal launch date is April 15."),
])
def test_a_date_of_one_event_in_verb_and_noun_form_conflicts(a, b):
    _both_conflict(a, b, "different number or date for the same statement: ")


@pytest.mark.parametrize("a,b", [
    # another event, another thing launched
    ("Atlas will launch on December 21.", "The Atlas beta launch date is December 14."),
    ("Atlas will launch on December 21.", "The Atlas launch party is on December 16."),
    ("Atlas will launch on December 21.", "The Atlas launch review is on December 14."),
    ("Atlas will launch on December 21.", "Orion will launch on December 14."),
    ("Atlas will launch on December 21.", "The Orion launch date is December 14."),
    # a date only weighed, denied, or of a narrower launch
    ("Atlas will launch on December 21.", "The Atlas launch date might be December 14."),
    ("Atlas will not launch on December 21.", "The Atlas launch date is December 14."),
    ("Atlas will launch in the EU on December 21.", "The Atlas launch date is December 14."),
    # a time is no date
    ("Atlas will launch at 10am.", "The Atlas launch date is December 14."),
    # a habit happens on no single day
    ("The team deploys on Mondays.", "The team deploy day is Thursday."),
])
def test_other_events_and_dates_not_given_are_no_conflict(a, b):
    _both_none(a, b)


# ------------------------------------------------------------------ 4. "is now" a letters-and-digits value
@pytest.mark.parametrize("a,b,old,new", [
    ("The office wifi password is tulip42.", "The office wifi password is now orchid77.", "tulip42", "orchid77"),
    ("The guest wifi password is maple19.", "The guest wifi password is now cedar83.", "maple19", "cedar83"),
    ("The door code for the server room is B7731.", "The door code for the server room is now C2208.",
     "b7731", "c2208"),
    ("The default region for new projects is eu-west-1.", "The default region for new projects is now us-east-2.",
     "eu-west-1", "us-east-2"),
])
def test_a_setting_that_is_now_another_value_conflicts(a, b, old, new):
    for x, y in ((a, b), (b, a)):
        reason = _reason(x, y)
        assert reason and reason.startswith("changed value: ") and reason.endswith(f"{old} vs {new}"), (x, y, reason)


def test_one_setting_with_two_letters_and_digits_values_conflicts():
    """Without "now" either: the same thing given two values, as with two numbers."""
    _both_conflict("The office wifi password is tulip42.", "The office wifi password is orchid77.",
                   "different value for the same statement: ")


@pytest.mark.parametrize("a,b", [
    # another setting's value
    ("The office wifi password is tulip42.", "The guest wifi password is now orchid77."),
    ("The VPN password is hunter22.", "The office wifi password is now orchid77."),
    ("The door code for the server room is B7731.", "The door code for the lab is now C2208."),
    # no value given, a value only weighed
    ("The office wifi password is tulip42.", "The office wifi password is now in the team vault."),
    ("The office wifi password is tulip42.", "The office wifi password could be orchid77 after the reset."),
    ("The office wifi password is tulip42.", "The office wifi password is not orchid77."),
    # moved to a place, not given a value
    ("The API key is abc123.", "We moved the API key to vault-2."),
    # one word is too general to be one thing
    ("The fix is PR-512.", "The fix is PR-610."),
])
def test_another_settings_value_or_none_is_no_conflict(a, b):
    _both_none(a, b)


# ------------------------------------------------------------------ 5. an identifier that is a setting's value
@pytest.mark.parametrize("a,b,old,new", [
    ("The PagerDuty escalation code is PX-7781.", "The PagerDuty escalation code changed to PX-9902.",
     "px-7781", "px-9902"),
    ("The Okta break-glass code is BG-1029.", "The Okta break-glass code was reset to BG-5530.", "bg-1029", "bg-5530"),
    ("The blocking ticket for the release is OPS-17.", "The blocking ticket for the release is now OPS-42.",
     "ops-17", "ops-42"),
    ("The Stripe webhook secret is whsec-4412.", "We rotated the Stripe webhook secret to whsec-9051.",
     "whsec-4412", "whsec-9051"),
])
def test_an_identifier_that_is_a_settings_value_conflicts_with_its_new_value(a, b, old, new):
    for x, y in ((a, b), (b, a)):
        reason = _reason(x, y)
        assert reason and reason.startswith("changed value: ") and reason.endswith(f"{old} vs {new}"), (x, y, reason)


@pytest.mark.parametrize("a,b", [
    # tickets, keys and versions that name two things
    ("Ticket PX-7781 is closed.", "Ticket PX-9902 is open."),
    ("PX-7781 is closed.", "PX-9902 is closed."),
    ("Ticket PX-7781 was reassigned to Omar.", "Ticket PX-9902 was reassigned to Ben."),
    ("The fix for PX-7781 is in review.", "The fix for PX-9902 is merged."),
    ("Release v2.3 is frozen.", "Release v2.4 is frozen."),
    # another code's new value
    ("The PagerDuty escalation code is PX-7781.", "The Opsgenie escalation code changed to PX-9902."),
    ("The PagerDuty escalation code is PX-7781.", "The PagerDuty override code changed to PX-9902."),
    ("The escalation code is PX-7781.", "The escalation code for billing changed to PX-9902."),
    ("The door code for the lab is 4417.", "The locker code changed to 9021."),
])
def test_identifiers_of_two_things_or_of_another_setting_are_no_conflict(a, b):
    _both_none(a, b)


# ------------------------------------------------------------------ a status line's counts
@pytest.mark.parametrize("a,b", [
    ("Sprint board: 14 tickets open, 3 blocked.", "Sprint board: 11 tickets open, 2 blocked."),
    ("Standup: 5 PRs waiting for review, 2 failing checks.", "Standup: 3 PRs waiting for review, 1 failing check."),
    ("Support queue: 42 tickets open, 7 escalated.", "Support queue: 35 tickets open, 4 escalated."),
])
def test_a_status_lines_counts_are_no_conflict(a, b):
    _both_none(a, b)
