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

Every pair is checked in both directions.
"""

from __future__ import annotations

import pytest

from reflection.heuristics import conflict_reason

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
