"""The conflict rules (the no-LLM default) on the pairs of a first-user walkthrough with the default
setup: corrections of a decision that were missed, so agents were served the stale decision first,
and numbered items that were said to conflict.

1. "from X to Y" after a change verb gave X up only when X came right before "to": a name with its
   version ("switched the billing service from PostgreSQL 16 to MySQL 8") gave up nothing.

Every pair is checked in both directions.
"""

from __future__ import annotations

import pytest

from memory.engine.text import extract_entities
from reflection.heuristics import conflict_reason, only_counts_differ

DECISION = "We decided to use PostgreSQL 16 as the primary database for the billing service."


def _reason(a: str, b: str) -> str | None:
    return conflict_reason(a, b, extract_entities(a), extract_entities(b))


def _verdict(a: str, b: str) -> str | None:
    """As ``reflection.conflicts.detect`` runs the rules on two memories days apart."""
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
