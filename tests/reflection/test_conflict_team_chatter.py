"""The conflict rules (the no-LLM default) on a team's chatter: a retrieval audit found 17 of 23
stored conflicts were lines about different people doing the same kind of thing ("Sofia will pair
with Ben on the search-indexer refactor this afternoon" vs "Kenji will pair with Maria on the
search-indexer refactor", "different place or name"), which contradict nothing."""

from __future__ import annotations

import pytest

from memory.engine.text import extract_entities
from reflection.heuristics import conflict_reason


def _reason(a: str, b: str) -> str | None:
    return conflict_reason(a, b, extract_entities(a), extract_entities(b))


@pytest.mark.parametrize("a,b", [
    ("Sofia will pair with Ben on the search-indexer refactor this afternoon.",
     "Kenji will pair with Maria on the search-indexer refactor."),
    ("Omar is debugging the flaky checkout test.", "Chen is debugging the flaky checkout test."),
    ("Priya demoed the new dashboard to Initech.", "Tom demoed the new dashboard to Globex."),
    ("Kenji is out sick.", "Maria is out sick."),
    ("Ben is working from the Lisbon office.", "Sofia is working from the Berlin office."),
    ("Nadia ran the onboarding session for the new hires.", "Sam ran the onboarding session for the new hires."),
    ("Kenji deployed the hotfix to staging.", "Maria and Luis deployed the hotfix to staging."),
    # two customers' or two people's own values
    ("Globex prefers invoices in EUR.", "Initech prefers invoices in USD."),
    ("Ana lives in Berlin.", "Bo lives in Paris."),
])
def test_different_people_doing_or_being_alike_are_no_conflict(a, b):
    assert _reason(a, b) is None and _reason(b, a) is None


@pytest.mark.parametrize("a,b", [
    # a role has one holder at a time
    ("Tom is the tech lead for the mobile app.", "Rachel is the tech lead for the mobile app."),
    ("Elena is the point of contact for Initech.", "Omar is the point of contact for Initech."),
    ("Kenji is on call tonight.", "Ana is on call tonight."),
    ("Priya owns the payments API.", "Luis owns the payments API."),
    # the names are the values of one thing, not who does something
    ("Ticket #404 is assigned to Ana.", "Ticket #404 is assigned to Bo."),
    ("The customer portal is hosted in Frankfurt.", "The customer portal is hosted in Dublin."),
    ("Ana lives in Berlin.", "Ana lives in Paris."),
])
def test_one_role_or_one_thing_with_two_names_still_conflicts(a, b):
    assert _reason(a, b) is not None
