"""Proxy write-back idempotency: event ids are unique per (org, owner), across all of an agent's
sessions, so they must name the conversation; a retried request writes nothing twice even when the
upstream samples a different answer; a continuation still writes."""

from __future__ import annotations

import pytest

from memory.models import Node, NodeKind
from proxy import writeback

pytestmark = pytest.mark.django_db

GREETING = "Hi! How can I help you today?"


def _key_id(world) -> int:
    from teams.models import ApiKey

    return ApiKey.objects.get(agent=world["a"].agent).pk


BOT = "alpha-bot"  # the world fixture's agent: an answer written back is its speaker's, the agent's


def _exchange(world, *, session: str, position: int, user: str, answer: str) -> list[int]:
    """What the proxy's after-answer step does for one answered request, run synchronously."""
    turns = writeback.turns_for(session_key=session, position=position, user_text=user, answer=answer,
                                model="gpt-test")
    return writeback.write_back(key_id=_key_id(world), session_key=session, turns=turns)


def _leaves(world, session: str) -> list[tuple[int, str, str]]:
    return list(Node.objects.filter(org=world["a"].org, owner_agent=world["a"].agent, session_key=session,
                                    kind=NodeKind.LEAF).order_by("seq").values_list("seq", "speaker", "text"))


def test_sessions_with_identical_openings_each_keep_their_turns(world):
    first = _exchange(world, session="ticket-1", position=1, user="Hello", answer=GREETING)
    second = _exchange(world, session="ticket-2", position=1, user="Hello", answer=GREETING)
    assert len(first) == len(second) == 2
    assert not set(first) & set(second)  # ticket-2 got its own nodes, not ticket-1's ids back
    expected = [(0, "user", "Hello"), (1, BOT, GREETING)]
    assert _leaves(world, "ticket-1") == expected
    assert _leaves(world, "ticket-2") == expected


def test_derived_sessions_keep_a_repeated_turn_at_the_same_position(world):
    """Without X-Nylon-Session the session is derived from the first user message: two different
    conversations that repeat a later exchange at the same position each keep it."""
    agent_id = world["a"].agent.id
    deploy = writeback.session_key_for(agent_id=agent_id, explicit="", first_user_text="The deploy failed.")
    slow = writeback.session_key_for(agent_id=agent_id, explicit="", first_user_text="The DB is slow.")
    assert deploy != slow
    for session in (deploy, slow):
        ids = _exchange(world, session=session, position=3, user="staging", answer="Checking staging now.")
        assert len(ids) == 2
        assert _leaves(world, session) == [(0, "user", "staging"), (1, BOT, "Checking staging now.")]


def test_retry_with_a_different_answer_writes_nothing_twice(world):
    question = "What is the DB port?"
    first = _exchange(world, session="ops", position=1, user=question, answer="5432.")
    # the caller retries the same request; the upstream samples another answer this time
    retry = _exchange(world, session="ops", position=1, user=question, answer="It is 5433.")
    assert retry == first  # the first answer stored wins
    assert _leaves(world, "ops") == [(0, "user", question), (1, BOT, "5432.")]

    # a genuine continuation (the next position of the same conversation) still writes
    follow = _exchange(world, session="ops", position=3, user="And the replica?", answer="5433.")
    assert len(follow) == 2 and not set(follow) & set(first)
    assert _leaves(world, "ops") == [(0, "user", question), (1, BOT, "5432."),
                                     (2, "user", "And the replica?"), (3, BOT, "5433.")]


def test_an_edited_question_at_the_same_position_gets_its_own_answer(world):
    """The answer is keyed by the question it answers: editing the question is not a retry."""
    _exchange(world, session="edit", position=1, user="Port of the DB?", answer="5432.")
    edited = _exchange(world, session="edit", position=1, user="Port of the cache?", answer="6379.")
    assert len(edited) == 2
    assert [t for _, _, t in _leaves(world, "edit")] == ["Port of the DB?", "5432.", "Port of the cache?", "6379."]


def test_event_ids_fit_the_column_for_the_longest_session_key(world):
    session = writeback.session_key_for(agent_id=1, explicit="s" * 500, first_user_text="")
    turns = writeback.turns_for(session_key=session, position=10_000, user_text="q", answer="a", model="")
    assert all(len(t["event_id"]) <= Node._meta.get_field("event_id").max_length for t in turns)


def test_a_written_back_answer_is_recalled_as_a_model_answer(world):
    """A model's reply may be wrong; recalled later beside what people said, its line says it was a
    model's answer, so it does not read as the newest statement on the matter."""
    from assets.context import build_context
    from teams.auth import actor_for_agent

    user_id, answer_id = _exchange(world, session="db", position=1, user="Which Postgres version do we run?",
                                   answer="We run Postgres 14 on the billing cluster.")
    meta = dict(Node.objects.filter(id__in=[user_id, answer_id]).values_list("id", "metadata"))
    assert meta[answer_id] == {"derived": "model_answer", "model": "gpt-test"}
    assert "derived" not in meta[user_id]
    actor = actor_for_agent(world["a"].agent, scopes=frozenset({"read", "write"}))
    ctx = build_context(actor=actor, query="Postgres version billing cluster", reinforce=False).as_dict()
    items = {r["node_id"]: r for r in ctx["recall"]}
    assert items[answer_id]["derived"] == "model_answer" and items[user_id]["derived"] == ""
    lines = {line for line in ctx["dynamic"].splitlines() if "[memory " in line}
    answer_line = next(line for line in lines if f"[memory {answer_id}]" in line)
    user_line = next(line for line in lines if f"[memory {user_id}]" in line)
    assert f"· {BOT} · model answer] [memory {answer_id}]" in answer_line
    assert "model answer" not in user_line
    fr = build_context(actor=actor, query="Postgres version billing cluster", language="fr",
                       reinforce=False).as_dict()["dynamic"]
    assert "réponse du modèle] [memory" in fr


def test_answers_written_back_before_the_marker_are_still_model_answers():
    from assets.context import MODEL_ANSWER, derived_kind

    assert derived_kind("proxy", {"model": "gpt-test"}) == MODEL_ANSWER  # written before "derived"
    assert derived_kind("proxy", {}) == ""  # the user's turn
    assert derived_kind("api", {"model": "x", "derived": "model_answer"}) == ""  # only the proxy writes answers
