""""How much is the ads budget now?" recalled "Ben does not own the Stripe integration anymore; Omar
owns it now." first, as a match, its only link the word "now". Words that date a statement without
saying what it is about ("now", "anymore", "currently", "nowadays", "still") are no search words: a
memory store holds states, and nearly any statement of one may carry them."""

from __future__ import annotations

import pytest

from .helpers import weave

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]

MEMORIES = ["Ben does not own the Stripe integration anymore; Omar owns it now.",
            "The staging cluster has three nodes.", "Deploys go out on Tuesdays at 14:00 UTC.",
            "Lunch is at noon on Fridays."]


def _context(client, query: str) -> dict:
    r = client.post("/api/v1/context", {"query": query, "reinforce": False}, format="json")
    assert r.status_code == 200, r.content
    return r.json()


def test_a_word_of_the_moment_matches_nothing(world, client_for):
    c = client_for(world["a"].key)
    ids = [weave(c, text, session=f"s{i}") for i, text in enumerate(MEMORIES)]
    body = _context(c, "How much is the ads budget now?")
    assert body["no_match"] is True, body["recall"]  # nothing stored speaks of the ads budget
    assert not any(r["matched"] for r in body["recall"])
    budget = weave(c, "We cut the ads budget to 25k.", session="s9")
    body = _context(c, "How much is the ads budget now?")
    assert body["recall"][0]["node_id"] == budget and body["no_match"] is False
    assert [r["node_id"] for r in body["recall"] if r["matched"]] == [budget]
    # and the owner question still finds its answer by what it asks about
    body = _context(c, "Who owns the Stripe integration currently?")
    assert body["recall"][0]["node_id"] == ids[0] and body["recall"][0]["matched"] is True
