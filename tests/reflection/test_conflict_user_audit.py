"""The conflict rules (the no-LLM default) on the misses of a user's audit: a changed setting stored
no conflict, so the stale memory was never disputed, each recall raised its tension, and it outranked
the memory that replaced it.

1. A value, then after ", not" the value it gives up with its unit repeated ("JWT tokens expire after 60
   minutes, not 15 minutes"): the contrast read only ", not $35" or ", not $35 per seat", so this one was
   a negation, which no value rule reads. The unit written after the value given up (or after the new
   one) must be the other side's. The thing may also be the subject and verb the value completes:
   "Decision changed: JWT access tokens now expire after 60 minutes, not 15" and "the public API
   authenticates with JWT access tokens that expire after 15 minutes" name no thing back to a
   determiner, as "the Pro plan at $39" does.
2. The same statement up to a value and its unit, one side adding how after it ("The payment webhook
   retries 5 times with exponential backoff" vs "The payment webhook now retries 8 times"): the bare
   pair was found, but the words after the unit pushed it under the same-statement rule's overlap. A
   scope or a rate after it ("8 times for card declines", "8 times a day") may be another case's value.
3. A switch from X to Y against the statement that the same subject uses X ("Our CI runs on GitHub
   Actions" vs "We switched the CI runner from GitHub Actions to Buildkite"). The giving-up rule found
   it only through a word of the name itself: "Actions" was taken out of the words shared as written,
   not as the lemma "action", so it stood for the subject, and "switched the docs hosting from GitHub
   Actions to Netlify" contradicted "Our CI runs on GitHub Actions" too. With the name's words out,
   the subject "CI" was read as two things ("the CI runner" vs "CI runs": a verb after a name is no
   noun it qualifies). The subject shared must be what the other side says uses the name (its clauses
   naming it), and without an entity list the name counts when both sides write it alike.

0. A status line's counts on two days are excused before the rules (``only_counts_differ``), and a
   number before a plural ("5 times", "15 minutes") was read as such a count, so "The payment webhook
   retries 5 times" and "... now retries 8 times" written on two days were no conflict even where the
   rules found one. A duration after "after", "within", "every" is a setting's, and so is a number of
   times said in the present; in the past ("failed 3 times", "took 26 minutes") it is still a tally.

Every pair is checked in both directions.
"""

from __future__ import annotations

import pytest

from reflection.heuristics import conflict_reason, only_counts_differ, statement

from .pairs import both_conflict as _both_conflict
from .pairs import both_none as _both_none

# ------------------------------------------------------------------ 1. a value with its unit, not the one given up
JWT = "JWT tokens expire after 15 minutes."
JWT_60 = "JWT tokens expire after 60 minutes, not 15 minutes."
DECIDED = "Decision: the public API authenticates with JWT access tokens that expire after 15 minutes."
CHANGED = "Decision changed: JWT access tokens now expire after 60 minutes, not 15."


@pytest.mark.parametrize("a,b", [
    (JWT, JWT_60),
    (DECIDED, CHANGED),
    # ours
    (JWT, "JWT tokens expire after 60 minutes, not 15."),
    (DECIDED, "JWT access tokens expire after 60 minutes, not 15 minutes."),
    ("The staging API has 3 replicas.", "The staging API has 5 replicas, not 3 replicas."),
    ("The Pro plan is $35 per seat.", "Finance wants the Pro plan at $39 per seat, not $35 per seat."),
])
def test_a_value_with_its_unit_given_instead_of_the_other_conflicts(a, b):
    _both_conflict(a, b, ("changed value:", "different number"))


@pytest.mark.parametrize("a,b", [
    # another thing's value
    (JWT, "Refresh tokens expire after 30 days."),
    ("Refresh tokens expire after 15 minutes.", JWT_60),
    ("Session cookies expire after 15 minutes.", CHANGED),
    ("Decision: the public API authenticates with JWT refresh tokens that expire after 15 minutes.", CHANGED),
    ("JWT tokens are revoked after 15 minutes of inactivity.", JWT_60),
    # the value given up in another unit
    ("JWT tokens expire after 15 days.", JWT_60),
    ("JWT tokens expire after 15 seconds.", CHANGED),
    # the same value, or only proposed
    ("JWT tokens expire after 60 minutes.", JWT_60),
    (JWT, "Security proposed that JWT tokens expire after 60 minutes, not 15 minutes."),
])
def test_a_value_contrast_with_a_unit_of_another_thing_conflicts_with_nothing(a, b):
    _both_none(a, b)


def test_a_value_contrast_with_its_unit_is_no_negation():
    assert not statement(JWT_60).negated and not statement(CHANGED).negated
    assert statement(JWT_60).numbers == {"60"}


# ------------------------------------------------------------------ 2. a value, and how after it on one side
WEBHOOK = "The payment webhook retries 5 times with exponential backoff."


@pytest.mark.parametrize("a,b", [
    (WEBHOOK, "The payment webhook now retries 8 times."),
    ("The payment webhook retries 5 times.", "The payment webhook now retries 8 times."),
    # ours
    (WEBHOOK, "The payment webhook will retry 8 times."),
    (WEBHOOK, "The payment webhook now retries up to 8 times."),
    ("The payment webhook retries 5 times with backoff.", "The payment webhook retries 8 times with exponential backoff."),
    ("The nightly export job times out after 30 minutes using the default pool.",
     "The nightly export job now times out after 60 minutes."),
])
def test_a_value_with_how_on_one_side_conflicts(a, b):
    _both_conflict(a, b, "different number")


@pytest.mark.parametrize("a,b", [
    ("The payment webhook retries 5 times.", "The email webhook retries 8 times."),
    (WEBHOOK, "The email webhook now retries 8 times."),
    ("The payment webhook retries 5 times with backoff.", "The payment webhook retries 5 times."),
    (WEBHOOK, "The payment webhook now retries 5 times."),
    # a scope, a rate or a window after the value: maybe another case's
    (WEBHOOK, "The payment webhook retries 8 times for card declines."),
    (WEBHOOK, "The payment webhook retries 8 times a day."),
    (WEBHOOK, "The payment webhook retries 8 times within an hour."),
    # only weighed, denied, or a tally
    (WEBHOOK, "The payment webhook might retry 8 times."),
    (WEBHOOK, "The payment webhook does not retry 8 times."),
    (WEBHOOK, "The payment webhook retried 8 times."),
    # another unit
    (WEBHOOK, "The payment webhook retries 8 minutes later."),
    # "with" after things counted says which ones, not how (a review: these conflicted)
    ("The staging cluster has 3 nodes with GPUs.", "The staging cluster has 5 nodes."),
    ("The plan includes 5 seats with admin rights.", "The plan includes 20 seats."),
])
def test_a_value_with_how_of_another_thing_conflicts_with_nothing(a, b):
    _both_none(a, b)


# ------------------------------------------------------------------ 3. switched from what the subject uses
CI = "Our CI runs on GitHub Actions."
SWITCHED = "We switched the CI runner from GitHub Actions to Buildkite."


@pytest.mark.parametrize("a,b", [
    (CI, SWITCHED),
    # ours
    ("The CI runs on GitHub Actions.", "CI runner switched from GitHub Actions to Buildkite."),
    ("We use GitHub Actions for CI.", SWITCHED),
    (CI, "We moved CI from GitHub Actions to Buildkite last week."),
    ("Our CI pipeline runs on GitHub Actions.", "We migrated the CI pipeline from GitHub Actions to CircleCI."),
    ("The payments queue uses RabbitMQ.", "We switched the payments queue from RabbitMQ to SQS."),
])
def test_a_switch_from_what_the_subject_uses_conflicts(a, b):
    _both_conflict(a, b, "replaced:")


@pytest.mark.parametrize("a,b", [
    (CI, SWITCHED),
    ("The payments queue uses RabbitMQ.", "We switched the payments queue from RabbitMQ to SQS."),
])
def test_a_switch_conflicts_without_an_entity_list(a, b):
    _both_conflict(a, b, "replaced:", rule=conflict_reason)


@pytest.mark.parametrize("a,b", [
    # another subject's switch, from another name or from the same one
    (CI, "We switched the docs hosting from GitHub Pages to Netlify."),
    (CI, "We switched the docs hosting from GitHub Actions to Netlify."),
    (CI, "The mobile team switched their builds from GitHub Actions to Bitrise."),
    ("Our docs build runs on GitHub Actions.", SWITCHED),
    # the other side says the name of another subject than CI
    ("Our CI runs on Jenkins; the docs build uses GitHub Actions.", SWITCHED),
    # a switch to the name, or only weighed
    (CI, "We switched the CI runner from Jenkins to GitHub Actions."),
    (CI, "We might switch the CI runner from GitHub Actions to Buildkite."),
    (CI, "We considered switching the CI runner from GitHub Actions to Buildkite."),
    # a restatement
    (CI, "CI runs on GitHub Actions."),
])
def test_a_switch_of_another_subject_or_not_made_conflicts_with_nothing(a, b):
    _both_none(a, b)


# ------------------------------------------------------------------ 0. a setting's duration or times is no count
@pytest.mark.parametrize("a,b,counts", [
    ("The payment webhook retries 5 times.", "The payment webhook now retries 8 times.", False),
    ("We will retry failed uploads 3 times.", "We will retry failed uploads 5 times.", False),
    ("JWT tokens expire after 15 minutes.", "JWT tokens expire after 60 minutes.", False),
    ("Alerts page on-call within 5 minutes.", "Alerts page on-call within 10 minutes.", False),
    ("The backup job runs every 6 hours.", "The backup job runs every 12 hours.", False),
    # that day's tally: in the past, or of things
    ("The nightly job failed 3 times.", "The nightly job failed 5 times.", True),
    ("The payment webhook retried 5 times.", "The payment webhook retried 8 times.", True),
    ("The deploy took 26 minutes.", "The deploy took 31 minutes.", True),
    ("Deploy succeeded after 3 attempts.", "Deploy succeeded after 5 attempts.", True),
    ("Board: 7 tickets in progress, 2 blocked.", "Board: 9 tickets in progress, 3 blocked.", True),
])
def test_a_settings_duration_or_times_is_no_count(a, b, counts):
    assert only_counts_differ(a, b) is counts and only_counts_differ(b, a) is counts
