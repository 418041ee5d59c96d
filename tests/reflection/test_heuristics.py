from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reflection.heuristics import conflict_reason, heuristic_fact, rewrite_first_person

MAY8 = datetime(2023, 5, 8, 12, tzinfo=UTC)


@pytest.mark.parametrize("text,speaker,expected", [
    ("I went to a support group yesterday.", "Caroline", "Caroline went to a support group yesterday (on 7 May 2023)."),
    ("Hey! I eat spicy food every day.", "Ana", "Ana eats spicy food every day."),
    ("We decided to move the offsite to Porto.", "Ben", "Ben and others decided to move the offsite to Porto."),
    ("My sister is visiting next week, I'm so happy.", "Mel", None),  # no first-person event verb after I
])
def test_heuristic_fact(text, speaker, expected):
    got = heuristic_fact(text, speaker, MAY8)
    if expected is None:
        assert got is None or got.startswith("Mel")
    else:
        assert got == expected


def test_questions_and_small_talk_give_no_fact():
    assert heuristic_fact("Did I tell you about it?", "Ana", MAY8) is None
    assert heuristic_fact("Hi!", "Ana", MAY8) is None
    assert heuristic_fact("Sounds great.", "Ana", MAY8) is None


def test_heuristic_fact_leaves_a_date_past_the_calendar_unsaid():
    """The fact is kept without a "(on ...)" when its time resolves outside years 1-9999 (this raised)."""
    assert heuristic_fact("I adopted him 10000 years ago.", "Jo", MAY8) == "Jo adopted him 10000 years ago."
    assert heuristic_fact("We will deploy tomorrow.", "Jo", datetime(9999, 12, 31, 12, tzinfo=UTC)) == (
        "Jo and others will deploy tomorrow.")


def test_coreference():
    assert rewrite_first_person("I don't like my job", "Jo") == "Jo doesn't like Jo's job"
    assert rewrite_first_person("I've adopted a dog and I love him", "Jo") == "Jo has adopted a dog and Jo loves him"


@pytest.mark.parametrize("a,b,ea,eb,kind", [
    ("I eat spicy food", "I don't eat spicy food", (), (), "negation"),
    ("I never eat spicy food", "I eat spicy food", (), (), "negation"),
    ("My flight leaves at 9am", "My flight leaves at 11am", (), (), "number"),
    ("I live in Berlin", "I live in Paris", ("Berlin",), ("Paris",), "place"),
    ("The offsite is on March 14", "The offsite is on April 2", (), (), "number"),
])
def test_conflict_rules_fire(a, b, ea, eb, kind):
    reason = conflict_reason(a, b, ea, eb)
    assert reason is not None and kind in reason


@pytest.mark.parametrize("a,b", [
    ("I eat spicy food", "I eat spicy food"),
    ("I love hiking in the Alps", "My sister hates swimming"),
    ("Hi!", "Hi!"),
    ("I live in Berlin", "I don't live in Paris"),
])
def test_conflict_rules_stay_quiet(a, b):
    assert conflict_reason(a, b, ("Berlin",) if "Berlin" in a else (), ("Paris",) if "Paris" in b else ()) is None
