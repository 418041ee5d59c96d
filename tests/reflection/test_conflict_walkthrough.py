"""The conflict rules (the no-LLM default) on the pairs of a first-user walkthrough with the default
setup: corrections of a decision that were missed, so agents were served the stale decision first,
and numbered items that were said to conflict.

1. "from X to Y" after a change verb gave X up only when X came right before "to": a name with its
   version ("switched the billing service from PostgreSQL 16 to MySQL 8") gave up nothing.
2. A number right after a noun that labels it names which one ("release candidate 3", "ws probe 0",
   "note 2"), as docs/architecture.md says; only the nouns of a list did, and "Note 1 ..." lost its
   noun to the lead-in rule ("Note: ..."). A value stays one: a setting's ("DB pool size 10"), a
   version ("production runs postgres 15"), a number after a preposition ("in meeting room 3").
3. A day given "now" had to follow a verb in "-s" or "-ed" ("now starts", "is now sent"): a habit's
   new day after a plural subject ("Deploys now go out on Thursdays") moved nothing; the pair was a
   conflict only when the entity list happened to hold the weekdays.
4. A denial in one clause of a correction ("we will not use PostgreSQL 16 for the billing service;
   we decided to use MySQL 8 instead") was read with the whole text, whose other clause is no word
   of the decision denied; and "will" was a word of what is denied, so "we will not use X" denied
   no "we decided to use X".

Not fixed (docs/architecture.md names it a known miss): "The billing service database is MySQL 8"
against the decision, another value of the same thing in other words; a rule telling "the primary
database for the billing service" from "the analytics database for the billing service" by their
words alone would flag the second too; the last test guards that false one for whoever adds the rule.

Every pair is checked in both directions.
"""

from __future__ import annotations

import pytest

from memory.engine.text import extract_entities
from reflection.heuristics import conflict_reason

from .pairs import both_conflict
from .pairs import both_none as _both_none
from .pairs import reason as _reason

DECISION = "We decided to use PostgreSQL 16 as the primary database for the billing service."


def _both_conflict(a: str, b: str, prefix: str | tuple[str, ...] = "") -> None:
    both_conflict(a, b, prefix, rule=_reason)


# ------------------------------------------------------------------ 1. from a versioned name to another
@pytest.mark.parametrize("a,b", [
    (DECISION, "Update: we switched the billing service from PostgreSQL 16 to MySQL 8."),
    (DECISION, "we switched billing from PostgreSQL 16 to MySQL 8"),
    # ours
    ("The ledger database is PostgreSQL 15.", "We migrated the ledger database from PostgreSQL 15 to CockroachDB."),
    ("Production runs Redis 6.2.", "We moved production from Redis 6.2 onto Valkey 8."),
])
def test_a_versioned_name_changed_from_is_given_up(a, b):
    _both_conflict(a, b, "replaced:")


@pytest.mark.parametrize("a,b", [
    # a flow, not a change: the data goes from one to the other every night
    (DECISION, "Every night we copy the billing service data from PostgreSQL 16 to MySQL 8 for reporting."),
    # only proposed
    (DECISION, "We might switch the billing service from PostgreSQL 16 to MySQL 8."),
    # another version given up than the one stated
    (DECISION, "We switched the billing service from PostgreSQL 14 to PostgreSQL 16."),
    # both give it up
    ("We switched billing from PostgreSQL 16 to MySQL 8.", "We switched the billing service from PostgreSQL 16 to MySQL 8."),
])
def test_a_versioned_name_not_given_up_conflicts_with_nothing(a, b):
    _both_none(a, b)


# ------------------------------------------------------------------ 2. a number that labels its noun
@pytest.mark.parametrize("a,b", [
    ("Note 1 is done.", "Note 2 is done."),
    ("Release candidate 3 is ready.", "Release candidate 4 is ready."),
    ("ws probe 0 after removal", "ws probe 1 after removal"),
    # ours
    ("We shipped release candidate 3 to staging.", "We shipped release candidate 4 to staging."),
    ("Our build agent pool 4 is offline.", "Our build agent pool 6 is offline."),
    ("The search cluster 2 is degraded.", "The search cluster 3 is degraded."),
    ("Note 3: the load test passed.", "Note 4: the load test passed."),
])
def test_a_number_naming_one_of_a_series_is_no_value(a, b):
    _both_none(a, b)


@pytest.mark.parametrize("a,b", [
    # a setting's value, after the setting's noun
    ("DB pool size 10", "DB pool size 20"),
    ("The DB pool size is 10.", "The DB pool size is 20."),
    # a version, after a verb: chat in lower case names no entity
    ("production runs postgres 15", "production runs postgres 16"),
    ("billing uses mysql 8", "billing uses mysql 9"),
    # after a preposition the numbered thing is the value ("in release 3.2")
    ("The retro is in meeting room 3.", "The retro is in meeting room 4."),
    # a lead-in with its colon is still one
    ("Note: 3 replicas run in staging.", "Note: 5 replicas run in staging."),
    ("the budget is 40k", "the budget is 25k"),
])
def test_a_value_after_a_noun_is_still_one(a, b):
    _both_conflict(a, b, "different number or date")


# ------------------------------------------------------------------ 3. a habit given a new day "now"
@pytest.mark.parametrize("a,b", [
    ("Deploys go out on Tuesdays", "Deploys now go out on Thursdays"),
    # ours
    ("Standups are at 9am.", "Standups now happen at 10am."),
    ("The release train leaves on Wednesdays.", "The release train now leave on Thursdays."),
    ("We deploy on Tuesdays.", "We now deploy on Thursdays."),
])
def test_a_habit_given_a_new_day_now_is_rescheduled(a, b):
    _both_conflict(a, b, "rescheduled:")
    # by the words alone: no entity list names the days
    assert conflict_reason(a, b) and conflict_reason(b, a)


@pytest.mark.parametrize("a,b", [
    ("Deploys go out on Tuesdays", "Hotfixes now go out on Thursdays"),
    ("Deploys go out on Tuesdays.", "Deploys now need two approvals and the retro is on Thursday."),
    ("Deploys go out on Tuesdays.", "Deploys for the mobile app now go out on Thursdays."),
    ("Payroll runs on the 25th.", "We now know payroll runs on the 25th."),
    ("The standup is at 9:30.", "We now have a standup bot and the retro is at 10:00."),
])
def test_now_of_another_thing_or_scope_moves_nothing(a, b):
    _both_none(a, b)


# ------------------------------------------------------------------ 4. a clause of a correction denies
@pytest.mark.parametrize("a,b", [
    (DECISION, "Correction: we will not use PostgreSQL 16 for the billing service; we decided to use MySQL 8 instead."),
    (DECISION, "We will not use PostgreSQL 16 for the billing service."),
    # ours
    ("We use Kafka for the event bus.", "We don't use Kafka for the event bus anymore; we use NATS."),
    ("Bob is joining the offsite in Lisbon.", "Bob is not joining the offsite in Lisbon, but Ana is joining it."),
    ("The new dashboard will support IE11.", "We checked it. The new dashboard will not support IE11."),
])
def test_a_clause_denying_the_statement_conflicts(a, b):
    _both_conflict(a, b, "negation flip:")


@pytest.mark.parametrize("a,b", [
    # another thing denied, another value denied, another person
    (DECISION, "We will not use PostgreSQL 16 for analytics; the billing service keeps it."),
    (DECISION, "We will not use PostgreSQL 15 for the billing service; we decided on PostgreSQL 16."),
    ("Ana is joining the offsite in Lisbon.",
     "Bob is not joining the offsite in Lisbon, but Ana is joining the offsite in Lisbon."),
    ("The office wifi password is tulip42.", "The office wifi password is not orchid77; it is tulip42."),
    ("We deploy on Fridays at 14:00.", "We don't deploy on Mondays; we deploy on Fridays at 14:00."),
    ("The billing export supports CSV and JSON.", "The billing export does not support XML, but it supports CSV."),
    ("The staging cluster runs 3 replicas.", "The staging cluster does not run 5 replicas; it runs 3 replicas."),
    ("We don't have a standup on Fridays. The retro is on Friday at 4pm.", "The retro is on Friday at 4pm."),
])
def test_a_clause_denying_another_thing_conflicts_with_nothing(a, b):
    _both_none(a, b)


# ------------------------------------------------------------------ known miss: another value in other words
def test_another_database_of_the_same_service_is_no_conflict():
    _both_none("We use PostgreSQL 16 as the analytics database for the billing service.",
               "The billing service database is MySQL 8.")


@pytest.mark.parametrize(("a", "b"), [
    ("Production runs PostgreSQL 15.", "Production runs PostgreSQL 16."),
    ("Staging uses Redis 6.", "Staging uses Redis 7."),
    ("Customers pay 40 dollars a seat.", "Customers pay 45 dollars a seat."),
])
def test_a_workplace_noun_opening_the_sentence_is_no_name(a, b):
    """"Production" opening a sentence was read as a name (the openers listed were casual chat's), so
    the statement kept one word of its own ("run") and the rules skip statements of fewer than two:
    another version of what production runs was no conflict with the entities the write path
    passes, and one without them."""
    assert "Production" not in extract_entities(a) and "Staging" not in extract_entities(a)
    assert _reason(a, b) is not None and _reason(b, a) is not None
