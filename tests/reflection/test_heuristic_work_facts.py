"""Heuristic facts (the no-LLM default) from a team's work chat. The triggers were personal-chat
verbs (booked, visited, love ...) after an "I"/"we": 269 turns of work chat gave 6 facts, none a
decision, task result or customer promise, while "Let's keep the standup short, we have the demo at
3pm" became a fact and "we'll" came out as "Bill Lumbergh (Initech) and others'll"."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.models import Node
from reflection import services
from reflection.heuristics import heuristic_fact

from .helpers import session, weave

THU = datetime(2024, 11, 14, 10, tzinfo=UTC)  # a Thursday

# One morning of a team's chat: the team lead, three agents and a customer.
SESSION = [
    ("Dana", "Morning all!"),
    ("Dana", "Let's keep the standup short, we have the demo at 3pm."),
    ("planner", "Decision: we go with Postgres 16 for the billing service."),
    ("coder", "Merged PR #88, the CSV export now streams."),
    ("coder", "Deployed v2.4 to staging yesterday."),
    ("support-bot", "We promised Initech the SSO fix by Friday."),
    ("Bill Lumbergh (Initech)", "OK, we'll need more than that by December."),
    ("Dana", "Sounds good."),
    ("coder", "Task NYL-520 done: the export handles 10k rows."),
    ("Dana", "Ana now owns the on-call rota."),
    ("planner", "Retro scheduled for Tuesday."),
    ("Dana", "Thanks, that's great."),
    ("coder", "I'll take a look."),
    ("planner", "We agreed to freeze the release branch on 2 December."),
    ("support-bot", "Ticket #404 resolved: the customer can log in again."),
    ("coder", "What's the status of NYL-523?"),
    ("Dana", "Is the demo still at 3pm"),
    ("Dana", "I'm on it."),
    ("coder", "I have no idea."),
    ("Dana", "Let me check with the team."),
    ("support-bot", "We will deliver the audit export to Initech by 15 January."),
    ("planner", "The team chose Kafka over RabbitMQ for the event bus."),
    ("coder", "Fixed the flaky login test."),
    ("planner", "Bo is responsible for the release notes."),
    ("Dana", "Great, thanks everyone!"),
]

EXPECTED = {
    "Decision: planner and others go with Postgres 16 for the billing service.",
    "coder merged PR #88, the CSV export now streams.",
    "coder deployed v2.4 to staging yesterday (on 13 November 2024).",
    "support-bot and others promised Initech the SSO fix by Friday (on 15 November 2024).",
    "Bill Lumbergh (Initech) and others will need more than that by December (in December 2024).",
    "Task NYL-520 done: the export handles 10k rows.",
    "Ana now owns the on-call rota.",
    "Retro scheduled for Tuesday (on 19 November 2024).",
    "planner and others agreed to freeze the release branch on 2 December (on 2 December 2024).",
    "Ticket #404 resolved: the customer can log in again.",
    "support-bot and others will deliver the audit export to Initech by 15 January (on 15 January 2025).",
    "The team chose Kafka over RabbitMQ for the event bus.",
    "coder fixed the flaky login test.",
    "Bo is responsible for the release notes.",
}


@pytest.mark.django_db
def test_a_work_chat_session_gives_its_decisions_results_and_promises(world, client_for, no_llm):
    a = world["a"]
    turns = [{"speaker": who, "text": text, "occurred_at": THU.replace(minute=i).isoformat()}
             for i, (who, text) in enumerate(SESSION)]
    leaves = weave(client_for(a.key), "standup", turns=turns, visibility="team", team_id=a.team.id)["node_ids"]
    out = services.abstract_session(session_id=session(a.org, "standup").id)
    facts = {f.text: f for f in Node.objects.filter(org=a.org, kind="fact")}
    assert set(facts) == EXPECTED, set(facts) ^ EXPECTED
    assert out["facts"] == len(EXPECTED)
    # each fact comes from its own turn, at the team scope of its leaf
    by_text = {text: leaves[i] for i, (_, text) in enumerate(SESSION)}
    f = facts["Ana now owns the on-call rota."]
    assert f.source_node_ids == [by_text["Ana now owns the on-call rota."]] and f.visibility == "team"
    # no filler, no question, nothing garbled
    assert not any("standup short" in t or "'ll" in t or "take a look" in t or "no idea" in t or "?" in t
                   for t in facts)


@pytest.mark.parametrize("text,speaker,expected", [
    # a decision, with or without "we"
    ("Decision: Postgres 16 for the billing service.", "planner", "Decision: Postgres 16 for the billing service."),
    ("We decided to drop IE11 support in Q1.", "Dana", "Dana and others decided to drop IE11 support in Q1."),
    ("We switched the queue from RabbitMQ to Redis streams.", "planner",
     "planner and others switched the queue from RabbitMQ to Redis streams."),
    # a task result, the subject left out as in chat
    ("Upgraded the staging Redis cluster to Redis 7.4.", "coder", "coder upgraded the staging Redis cluster to Redis 7.4."),
    ("Released 2.4.1 to production.", "coder", "coder released 2.4.1 to production."),
    ("Closed NYL-530 as a duplicate.", "coder", "coder closed NYL-530 as a duplicate."),
    ("The billing migration is completed.", "coder", "The billing migration is completed."),
    # ownership
    ("Ana is now responsible for on-call.", "Dana", "Ana is now responsible for on-call."),
    # a promise, its date resolved ahead: the coming Monday, tomorrow
    ("Customer Initech was told the fix ships on Monday.", "support-bot",
     "Customer Initech was told the fix ships on Monday (on 18 November 2024)."),
    ("I committed to a callback for Initech tomorrow at 10:00.", "support-bot",
     "support-bot committed to a callback for Initech tomorrow at 10:00 (on 15 November 2024)."),
    # a schedule change
    ("We're moving the demo to Friday at 2pm.", "Dana", "Dana and others are moving the demo to Friday at 2pm "
                                                      "(on 15 November 2024)."),
    # an acknowledgement before the event is no part of it
    ("OK, we'll ship the export on Friday.", "coder", "coder and others will ship the export on Friday "
                                                     "(on 15 November 2024)."),
    ("Nice, I will update the runbook tomorrow.", "Ben", "Ben will update the runbook tomorrow (on 15 November 2024)."),
    # a courtesy before a work event keeps the event
    ("Nice work on the release, we shipped 3 days early.", "Dana",
     "Nice work on the release, Dana and others shipped 3 days early."),
])
def test_work_events_are_facts(text, speaker, expected):
    assert heuristic_fact(text, speaker, THU) == expected


@pytest.mark.parametrize("text,speaker,expected", [
    ("We'll need more than that by December.", "Bill Lumbergh (Initech)",
     "Bill Lumbergh (Initech) and others will need more than that by December (in December 2024)."),
    ("We're on Postgres 15 in production and we've planned the upgrade.", "Bo",
     "Bo and others are on Postgres 15 in production and Bo and others have planned the upgrade."),
    ("We'd like to ship the export first.", "Bo", "Bo and others would like to ship the export first."),
    # "our" with "we" before it is theirs
    ("We moved our staging cluster to Frankfurt.", "Bo", "Bo and others moved their staging cluster to Frankfurt."),
])
def test_we_contractions_read_as_english(text, speaker, expected):
    assert heuristic_fact(text, speaker, THU) == expected


@pytest.mark.parametrize("text", [
    "Let's keep the standup short, we have the demo at 3pm.",
    "Let's deploy on Friday.",  # proposed, not decided
    "Please merge PR #88 after lunch.",
    "Thanks, that's great.",
    "Sounds good to me.",
    "I'll take a look.",
    "I'm on it.",
    "I have no idea.",
    "Let me check with the team.",
    "Great, thanks everyone!",
    "Fixed it.",
    "Agreed, sounds good.",
    "What's the status of NYL-523?",
    "Is the demo still at 3pm",
    "Did the billing migration finish",
    "Any update on the Initech fix",
])
def test_filler_proposals_and_questions_are_no_fact(text):
    assert heuristic_fact(text, "Dana", THU) is None
