"""The conflict rules (the no-LLM default) on the misses of a user's audit: a changed setting stored
no conflict, so the stale memory was never disputed, each recall raised its tension, and it outranked
the memory that replaced it.

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

from reflection.heuristics import conflict_reason, only_counts_differ

from .pairs import both_conflict as _both_conflict
from .pairs import both_none as _both_none

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
