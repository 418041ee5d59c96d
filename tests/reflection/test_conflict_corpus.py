"""The conflict rules (the no-LLM default) on a team's work chat: a bot reporting CI runs, tickets
and standups filled the queue with 187 false conflicts ("CI run 1224 passed in 26 minutes" vs
"CI run 1227 ..."), because a number that names which run, ticket or standup was read as a value
of one statement, and questions were compared as if they asserted something."""

from __future__ import annotations

from itertools import combinations

import pytest

from memory.engine.text import extract_entities
from reflection import conflicts
from reflection.heuristics import asserted, conflict_reason, is_question
from reflection.models import Conflict

from .helpers import weave

# A day of a team's work chat, as its agents and people wrote it: the true contradictions are the
# pairs in TRUE_CONFLICTS, every other pair must stay quiet.
CHAT = [
    "The staging Redis cluster runs Redis 6.2.",                     # 0
    "CI run 1224 passed in 26 minutes.",                             # 1
    "Standup 16 November: what's everyone on?",                      # 2
    "Ticket #404 resolved: the customer can log in again.",          # 3
    "Production runs Postgres 15.",                                  # 4
    "We never deploy on Fridays.",                                   # 5
    "CI run 1227 passed in 31 minutes.",                             # 6
    "Ticket #408 resolved: the customer can log in again.",          # 7
    "Standup 17 November: what's everyone on?",                      # 8
    "Should we upgrade staging to Redis 7.4?",                       # 9
    "NYL-520 is blocked on the API review.",                         # 10
    "NYL-523 is blocked on the API review.",                         # 11
    "The Initech renewal call is on 3 December.",                    # 12
    "PR 88 merged into main after review.",                          # 13
    "PR 91 merged into main after review.",                          # 14
    "Let's keep the standup short, we have the demo at 3pm.",        # 15
    "Sprint 14 ends on Friday with the billing demo.",               # 16
    "Sprint 15 ends on Friday with the billing demo.",               # 17
    "The staging Redis cluster runs Redis 7.4.",                     # 18
    "Invoice 2024-118 was sent to Initech.",                         # 19
    "Invoice 2024-121 was sent to Initech.",                         # 20
    "We migrated production to Postgres 16 last night.",             # 21
    "Is production still on Postgres 15",                            # 22
    "We deploy on Fridays at 14:00 after the freeze ends.",          # 23
    "Incident 12 was caused by an expired certificate.",             # 24
    "Incident 13 was caused by an expired certificate.",             # 25
    "The Initech renewal call is on 5 December.",                    # 26
    "The customer portal is hosted in Frankfurt.",                   # 27
    "The customer portal is hosted in Dublin.",                      # 28
    "16 November standup: Ana on billing, Bo on search.",            # 29
    "17 November standup: Ana on billing, Bo on search.",            # 30
    "The fix for the login bug ships in release 3.2.",               # 31
    "The fix for the login bug ships in release 3.4.",               # 32
    "CI run 1230 passed in 24 minutes.",                             # 33
    "Ticket #404 is assigned to Ana.",                               # 34
    "Ticket #404 is assigned to Bo.",                                # 35
    "We need to order 5 laptops for the new hires.",                 # 36
    "We need to order 8 laptops for the new hires.",                 # 37
    "Build 2210 failed on the flaky login test.",                    # 38
    "Build 2214 failed on the flaky login test.",                    # 39
    "Order 5521 shipped to Initech on Monday.",                      # 40
    "Order 5524 shipped to Initech on Monday.",                      # 41
    "The billing cutover is on 4 December.",                         # 42
    "The billing cutover moves to 9 December.",                      # 43
    "We moved to the new office on Monday.",                         # 44
    "The new office opens on Tuesday.",                              # 45
    "Release review moved to Monday.",                               # 46
    "Budget for paid ads in Q1 is 40k EUR.",                         # 47
    "Correction: Q1 paid ads budget is cut to 25k EUR after the finance review.",  # 48
    "The Q1 hiring budget was raised to 60k EUR.",                   # 49
    "My locker code is 4417.",                                       # 50
    "My locker code changed to 9021.",                               # 51
    "The API rate limit is 500 requests per minute.",                # 52
    "The API rate limit is now 800 requests per minute.",            # 53
    "The office wifi password changed to 2291 yesterday.",           # 54
    "Understood, I'll prepare the ad plan within 40k EUR.",          # 55
    "Deploy checklist reviewed with the team (note 1).",             # 56
    "Deploy checklist reviewed with the team (note 2).",             # 57
]
TRUE_CONFLICTS = {
    (0, 18),   # one cluster, two Redis versions
    (4, 21),   # runs Postgres 15 vs migrated to 16
    (5, 23),   # a denial of a statement made with more detail
    (12, 26),  # one call, two dates
    (27, 28),  # one portal, two places
    (31, 32),  # one fix, two releases (a release it ships in is a value, not the thing spoken of)
    (34, 35),  # one ticket, two assignees
    (36, 37),  # "order" the verb: a quantity, not order number 5
    (42, 43),  # one cutover, rescheduled in other words than "is on"
    (47, 48),  # a value said to have changed, in other words than the statement it changes
    (50, 51),  # the same, of a person's own thing
    (52, 53),  # "is now": the same statement with another number
}


def test_the_rules_find_the_true_conflicts_of_a_work_chat_and_no_others():
    found = {}
    for i, j in combinations(range(len(CHAT)), 2):
        a, b = CHAT[i], CHAT[j]
        reason = conflict_reason(a, b, extract_entities(a), extract_entities(b))
        if reason:
            found[(i, j)] = reason
    assert set(found) == TRUE_CONFLICTS, {k: v for k, v in found.items() if k not in TRUE_CONFLICTS}


@pytest.mark.parametrize("a,b", [
    ("CI run 1224 passed in 26 minutes.", "CI run 1227 passed in 31 minutes."),
    ("Ticket #404 resolved.", "#408 resolved."),
    ("NYL-520 done, deployed to staging.", "NYL-523 done, deployed to staging."),
    ("Standup 16 November: Ana on billing.", "Standup 17 November: Ana on billing."),
    ("The 16 November standup ran long.", "The 17 November standup ran long."),
    ("Sprint 14: goal is the billing export.", "Sprint 15: goal is the billing export."),
    ("Ana closed ticket 404 this morning.", "Ana closed ticket no. 408 this morning."),
])
def test_numbers_that_name_the_referent_are_different_things(a, b):
    assert conflict_reason(a, b, extract_entities(a), extract_entities(b)) is None


@pytest.mark.parametrize("a,b", [
    # the same referent with two values still contradicts
    ("CI run 1224 took 26 minutes.", "CI run 1224 took 31 minutes."),
    ("Ticket #404 is due on 3 December.", "Ticket #404 is due on 9 December."),
    # a number after a verb or a preposition is a value: "run 3 replicas", "assigned to sprint 14"
    ("We run 3 replicas of the API.", "We run 5 replicas of the API."),
    ("The export fix is planned for sprint 14.", "The export fix is planned for sprint 16."),
])
def test_values_of_one_referent_still_contradict(a, b):
    assert conflict_reason(a, b, extract_entities(a), extract_entities(b)) is not None


@pytest.mark.parametrize("text", [
    "Standup 16 November: what's everyone on?",
    "Is production still on Postgres 15",
    "Did Ana merge the billing PR",
    "Any update on NYL-520",
    "Has anyone seen the export logs",
    "Should we upgrade staging to Redis 7.4",
    "Is there a workaround for Initech",
])
def test_questions_assert_nothing(text):
    assert is_question(text) and asserted(text) == ""
    assert conflict_reason(text, "Production runs Postgres 15.") is None
    assert conflict_reason(text, text.rstrip("?") + " not") is None


@pytest.mark.parametrize("text", [
    "Was fixed yesterday by Ana.", "Is done.", "Deployed v2.4 to staging.", "Will deliver by Friday.",
])
def test_statements_without_a_subject_are_no_questions(text):
    assert not is_question(text)


def test_a_question_beside_a_statement_leaves_the_statement():
    """"Redis runs 6.2. Should we move to 7.4?" states 6.2 only: it contradicts "runs 7.4"."""
    assert asserted("The staging Redis cluster runs Redis 6.2. Should we move it to Redis 7.4?") == (
        "The staging Redis cluster runs Redis 6.2.")
    assert conflict_reason("The staging Redis cluster runs Redis 6.2. Should it run Redis 7.4?",
                           "The staging Redis cluster runs Redis 7.4.", ("Redis",), ("Redis",)) is not None


@pytest.mark.django_db
def test_a_bot_reporting_runs_tickets_and_standups_floods_no_queue(world, client_for, no_llm):
    """The audit's case end to end: one bot's lines, checked against their nearest neighbours as a
    weave's follow-up does; only the true conflicts among them are stored."""
    a = world["a"]
    turns = [{"speaker": "support-bot", "text": t, "occurred_at": f"2024-11-{14 + i // 10:02d}T{8 + i % 10:02d}:00:00Z"}
             for i, t in enumerate(CHAT)]
    ids = weave(client_for(a.key), "work-chat", turns=turns, end=False, visibility="team",
                team_id=a.team.id)["node_ids"]
    conflicts.detect(org_id=a.org.id, node_ids=ids)
    stored = {(ids.index(c.node_a_id), ids.index(c.node_b_id)) for c in Conflict.objects.all()}
    assert stored == TRUE_CONFLICTS


@pytest.mark.parametrize("a,b", [
    ("The cutover is on December 4.", "The cutover moves to December 9."),
    ("The launch is on March 3.", "The launch was postponed to March 10."),
    ("Release review is on Friday.", "Release review moved to Monday."),
    ("Standup is at 9:30.", "We moved the standup to 10am."),
    ("Sprint 14 ends on Friday with the billing demo.", "We pushed the billing demo to Monday."),
    # a chat line's lead-in and the move's reason are not part of what moved
    ("The Postgres upgrade to version 17 is scheduled for December 14th.",
     "Update: the Postgres upgrade to version 17 moved to January 9th."),
    ("The Postgres upgrade to version 17 is scheduled for December 14th.",
     "Heads up, the Postgres upgrade to version 17 moved to January 9th."),
    ("Agreed. The Postgres upgrade to version 17 is scheduled for December 14th.",
     "Update: the Postgres upgrade to version 17 moved to January 9th because of the holiday change freeze."),
    ("The launch is on March 3.", "FYI: the launch was postponed to March 10 due to the QA backlog."),
])
def test_a_thing_moved_to_another_day_contradicts_the_day_it_had(a, b):
    reason = conflict_reason(a, b, extract_entities(a), extract_entities(b))
    assert reason and reason.startswith("rescheduled: "), reason


def test_the_reschedule_reason_names_the_days_as_written():
    a, b = "The cutover is on December 4.", "Update: the cutover moves to December 9 because of the freeze."
    assert conflict_reason(a, b) == "rescheduled: December 4 vs December 9"
    a, b = "Release review is on Friday.", "Release review moved to Monday."
    assert conflict_reason(a, b) == "rescheduled: Friday vs Monday"


@pytest.mark.parametrize("a,b", [
    ("We moved the meeting to 3pm.", "We moved the deploy to Friday."),  # two things moved
    ("Ana moved to Berlin on March 3.", "Ben has his birthday on March 10."),
    ("We moved to the new office on Monday.", "The new office opens on Tuesday."),  # a move, not a new date
    ("We moved the billing demo to the big room.", "The billing demo is on Friday."),  # a room, not a day
    ("We moved the cutover to December 9.", "The cutover moved to December 9."),  # the same day
    ("The cutover moves to December 9 at 10am.", "The cutover is on December 9."),  # more detail
    ("The cutover did not move to December 9.", "The cutover is on December 4."),  # a denial, not a move
    # the reason names another thing than what moved
    ("The cutover moves to December 9 because the billing demo is on December 4.", "The billing demo is on December 4."),
    ("Update: we moved the meeting to 3pm.", "Update: the deploy is on Friday."),
    # a "due to" / "so that" that names the thing, not the move's reason
    ("The payment due to Acme is on Friday.", "The payment due to Globex moved to Monday."),
    ("The call with the team so that Ana can present is on Friday.",
     "The call with the team so that Ben can present moved to Monday."),
    ("The launch, due to the Acme contract, is on March 3.", "The launch, due to the Globex contract, moved to March 10."),
])
def test_moves_of_other_things_or_to_the_same_day_are_no_conflict(a, b):
    assert conflict_reason(a, b, extract_entities(a), extract_entities(b)) is None
