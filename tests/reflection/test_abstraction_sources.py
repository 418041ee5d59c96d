"""An LLM answer whose facts cite no usable turn must not leave a session done with zero facts and
the LLM state ok: the chunk falls back to the heuristic facts and the degradation shows."""

from __future__ import annotations

import pytest

from assets.models import AuditEvent
from memory.models import Node
from reflection import llm as L
from reflection import services

from .helpers import TURNS, session, weave

pytestmark = pytest.mark.django_db

HEURISTIC = [
    "Ana went to a pottery class yesterday (on 7 May 2023).",
    "Ana decided to sign up for the spring course.",
    "Ben eats spicy food every day.",
]


def facts(*cited) -> tuple:
    return ("json", {"facts": [{"text": f"Fact number {i} about the talk.", "source_turns": c}
                               for i, c in enumerate(cited)]})


def leaf_ids() -> list[int]:
    return list(Node.objects.filter(kind="leaf").order_by("seq").values_list("id", flat=True))


@pytest.mark.parametrize("cited", [([],), ([], [7, 99]), ([-1], [4])])
def test_facts_citing_no_turn_fall_back_to_heuristics_visibly(world, client_for, llm, cited):
    server = llm.need_script()
    c = client_for(world["a"].key)
    weave(c, "s1")
    s = session(world["a"].org, "s1")
    server.push(facts(*cited))
    out = services.abstract_session(session_id=s.id)
    assert out["status"] == "done" and out["facts"] == 3 and out["fallback"] == 3
    assert out["dropped"] == len(cited)
    written = list(Node.objects.filter(kind="fact").order_by("seq"))
    assert [f.text for f in written] == HEURISTIC and {f.source_kind for f in written} == {"heuristic"}
    s.refresh_from_db()
    assert s.abstraction_status == "done" and "unusable_answer" in s.abstraction_error
    assert "none citing a turn" in s.abstraction_error
    state = L.llm_state()
    assert state["status"] == "degraded" and state["last_error"] == "unusable_answer"
    assert "3 heuristic facts written instead" in state["detail"]
    body = c.get("/api/v1/background/status").json()
    assert body["llm"]["status"] == "degraded" and body["llm"]["last_error"] == "unusable_answer"
    audit = AuditEvent.objects.filter(action="memory.abstract").latest("id")
    assert audit.detail["dropped"] == len(cited) and "unusable_answer" in audit.detail["degraded"]


def test_no_facts_where_the_heuristic_finds_events_falls_back(world, client_for, llm):
    server = llm.need_script()
    weave(client_for(world["a"].key), "s1")
    server.push(("json", {"facts": []}))
    out = services.abstract_session(session_id=session(world["a"].org, "s1").id)
    assert out["facts"] == 3 and out["fallback"] == 3
    assert L.llm_state()["last_error"] == "unusable_answer" and "no facts" in L.llm_state()["detail"]


def test_no_facts_for_small_talk_is_normal(world, client_for, llm):
    server = llm.need_script()
    weave(client_for(world["a"].key), "s1", turns=[
        {"speaker": "Ana", "text": "Hi there!", "occurred_at": "2023-05-08T10:00:00Z"},
        {"speaker": "Ben", "text": "Hello, how are you?", "occurred_at": "2023-05-08T10:01:00Z"}])
    s = session(world["a"].org, "s1")
    server.push(("json", {"facts": []}))
    assert services.abstract_session(session_id=s.id) == {"status": "done", "facts": 0, "source": "llm"}
    s.refresh_from_db()
    assert s.abstraction_error == "" and L.llm_state()["status"] == "ok"


def test_turns_numbered_from_one_are_shifted_when_unambiguous(world, client_for, llm):
    server = llm.need_script()
    weave(client_for(world["a"].key), "s1")
    server.push(facts([1], [2], [3, 4], [4]))  # cites 4 of 4 turns and never 0: numbered from 1
    out = services.abstract_session(session_id=session(world["a"].org, "s1").id)
    assert out == {"status": "done", "facts": 4, "source": "llm"}
    ids = leaf_ids()
    written = Node.objects.filter(kind="fact").order_by("event_id")
    assert [f.source_node_ids for f in written] == [[ids[0]], [ids[1]], [ids[2], ids[3]], [ids[3]]]
    assert {f.source_kind for f in written} == {"llm"} and L.llm_state()["status"] == "ok"


def test_ambiguous_numbering_is_read_as_asked_and_strays_are_counted(world, client_for, llm):
    server = llm.need_script()
    weave(client_for(world["a"].key), "s1")
    server.push(facts([1], [2, 9]))  # could be either numbering: read as the prompt asks (from 0)
    out = services.abstract_session(session_id=session(world["a"].org, "s1").id)
    assert out == {"status": "done", "facts": 2, "source": "llm"}
    ids = leaf_ids()
    assert [f.source_node_ids for f in Node.objects.filter(kind="fact").order_by("event_id")] == [
        [ids[1]], [ids[2]]]
    server.push(facts([0], [17]))
    weave(client_for(world["a"].key), "s1", turns=TURNS[:1])
    out = services.abstract_session(session_id=session(world["a"].org, "s1").id)
    assert out == {"status": "done", "facts": 1, "source": "llm", "dropped": 1}  # counted, not degraded
    assert L.llm_state()["status"] == "ok"
