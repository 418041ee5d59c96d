"""The "(on <date>)" a heuristic fact carries belongs to the fact, or is left out."""

from __future__ import annotations

from datetime import UTC, datetime

from reflection.heuristics import heuristic_fact

WED = datetime(2024, 5, 15, 12, tzinfo=UTC)


def test_a_habit_gets_no_single_date():
    assert heuristic_fact("I work out every Monday.", "Ana", WED) == "Ana works out every Monday."


def test_two_times_in_one_sentence_give_no_date_to_both():
    assert heuristic_fact("I visited Rome on Monday and will visit Paris on Friday.", "Ana", WED) == (
        "Ana visited Rome on Monday and will visit Paris on Friday.")


def test_one_time_is_still_resolved():
    assert heuristic_fact("We went to see each other yesterday.", "Ana", WED) == (
        "Ana and others went to see each other yesterday (on 14 May 2024).")
    assert heuristic_fact("I bought a car today.", "Ana", WED) == "Ana bought a car today (on 15 May 2024)."
