"""A question naming a day ("Can I deploy to production on Friday November 20?") is about that day
through the date focus (its channel and bonus), not through the day's words: a node's lexical
document holds its session date ("20 November 2026 Friday"), so the words also met every line
written that day and every 20th, and ten unrelated lines of the 20th ("Phase 2.", "Retro notes
saved") came above the freeze notice that answers the question, matched by "deploy" and
"production" (a retrieval audit of a team's month of memory). The named days' words are left out of
the lexical query; what happened that day still comes with the date focus."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]

CHATTER = ["Phase 2.", "Retro notes saved to the wiki page.", "Retro time. What went well this sprint?",
           "Approve. Make the max attempts configurable per customer.", "Sounds good, let's try quiet hours.",
           "Invoices are finally correct for EU customers.", "What didn't go well: too many Slack pings.",
           "Action: Priya updates the onboarding doc.", "Proposal: no meetings between 1pm and 3pm.",
           "The new disk alerts caught two issues before they became outages.", "Lunch is pizza again.",
           "Eli proposes quiet hours for the whole team."]


def _hits(client, query: str, k: int = 5) -> list[str]:
    r = client.post("/api/v1/memories/resonate", {"query": query, "k": k, "reinforce": False}, format="json")
    assert r.status_code == 200, r.content
    return [h["text"] for h in r.json()["hits"]]


def test_a_day_named_in_the_question_is_no_word_every_line_of_that_day_matches(world, client_for):
    c = client_for(world["a"].key)
    today = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    day = today - timedelta(days=12)
    named = f"{day:%A} {day:%B} {day.day}"
    freeze = (f"Deploy freeze: no production deploys from {named} through the end of the month, "
              "hotfixes only.")
    body = {"session_key": "freeze", "turns": [
        {"speaker": "Dana", "text": freeze, "occurred_at": (day - timedelta(days=15)).isoformat()}]}
    assert c.post("/api/v1/memories/weave-session", body, format="json").status_code == 201
    body = {"session_key": "that-day", "turns": [
        {"speaker": "Eli", "text": text, "occurred_at": (day + timedelta(minutes=i)).isoformat()}
        for i, text in enumerate(CHATTER)]}
    assert c.post("/api/v1/memories/weave-session", body, format="json").status_code == 201

    # (every line of the day keeps the date focus's flat bonus, which also serves "Decision: ..." of
    # a day asked "what did we decide": so the notice is not first, but among the first five; it
    # was below the day's twelve lines)
    hits = _hits(c, f"Can I deploy to production on {named}?", k=5)
    assert freeze in hits, hits
    # what happened that day is still that day's: a question with no other word brings its lines
    hits = _hits(c, f"What happened on {named}?", k=5)
    assert set(hits) <= set(CHATTER), hits
