"""Conflict rules on ordinary paraphrases and plain contradictions (the no-LLM default)."""

from __future__ import annotations

import pytest

from reflection.heuristics import conflict_reason

B = ("Berlin",)


@pytest.mark.parametrize("a,b,ea,eb", [
    # third-person heuristic facts: "eats" and "doesn't eat" are one verb
    ("Alice eats meat.", "Alice doesn't eat meat.", (), ()),
    # "can't" is "can not", not "ca not"
    ("I can swim", "I can't swim", (), ()),
    ("I will go to the party", "I won't go to the party", (), ()),
    # chat spelling without the apostrophe still denies
    ("Alice eats meat.", "Alice dont eat meat.", (), ()),
    # a plain move-away with no shared wording
    ("I live in Berlin", "I moved away from Berlin", B, B),
    ("Alice works at Google.", "Alice quit Google.", ("Alice", "Google"), ("Alice", "Google")),
])
def test_plain_contradictions_are_found(a, b, ea, eb):
    assert conflict_reason(a, b, ea, eb) is not None


@pytest.mark.parametrize("a,b,ea,eb", [
    ("I have 2 kids", "I have two kids", (), ()),
    ("I am twenty five years old", "I am 25 years old", (), ()),
    ("I moved to Berlin in 2020", "I moved to Berlin in May 2020", B, B),
    ("I live in Berlin", "I live in Berlin, Germany", B, ("Berlin", "Germany")),
    ("I live in Berlin", "I left my keys in Berlin", B, B),
    ("I live in Berlin", "I lived in Berlin", B, B),
])
def test_paraphrases_and_refinements_are_no_conflict(a, b, ea, eb):
    assert conflict_reason(a, b, ea, eb) is None
