"""A question that names a day ("What did we decide on March 5?") recalls what happened that day
first (the engine's date focus), and those memories match the question: the no-match note told the
model that the right answer "probably does not answer it"."""

from __future__ import annotations

import pytest

from assets.context import NO_MATCH

from .helpers import weave

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]


def test_the_memories_of_the_named_day_match_the_question(world, client_for):
    c = client_for(world["a"].key)
    decision = weave(c, "We switched the card processor from Adyen to Stripe.", session="pay",
                     occurred_at="2025-03-05T10:00:00Z", speaker="dave")
    weave(c, "The office plants need watering.", session="misc", occurred_at="2025-04-11T10:00:00Z")
    for query in ("What did we decide on March 5?", "What happened on 5 March 2025?"):
        r = c.post("/api/v1/context", {"query": query, "reinforce": False}, format="json")
        body = r.json()
        assert r.status_code == 200 and body["recall"][0]["node_id"] == decision, body["recall"]
        assert body["recall"][0]["matched"] is True and body["no_match"] is False, query
        assert NO_MATCH["en"] not in body["dynamic"]
    # a day nothing happened on gets the note as before
    body = c.post("/api/v1/context", {"query": "What did we decide on March 12?", "reinforce": False},
                  format="json").json()
    assert body["no_match"] is True
