"""A degraded LLM stays visible until the failing kind of work succeeds again: the heuristic
fallback of an abstraction (an unusable answer) or an abstraction the provider refuses every time
must not be erased from /healthz and background/status by the next successful probe or judge call,
and the sessions done with the fallback are listed with the reason."""

from __future__ import annotations

import pytest

from nylon_project import health
from reflection import conflicts, services
from reflection import llm as L

from .helpers import session, weave

pytestmark = pytest.mark.django_db


def judge_once(org) -> None:
    L.complete_json(org=org, system=conflicts.JUDGE_SYSTEM, schema=conflicts.JUDGE_SCHEMA, max_tokens=200,
                    user="Statement A (Ana, 2023-05-08): I like tea.\nStatement B (Ana, 2023-05-09): I hate tea.")


def test_unusable_abstraction_stays_degraded_after_other_calls_succeed(world, client_for, llm):
    server = llm.need_script()
    c = client_for(world["a"].key)
    weave(c, "s1")
    server.push(("json", {"facts": []}))
    out = services.abstract_session(session_id=session(world["a"].org, "s1").id)
    assert out["fallback"] == 3
    judge_once(world["a"].org)  # the judge and the probe answer fine …
    assert L.probe()["status"] == "degraded"  # … the abstraction's fallback still shows
    state = health._llm()
    assert state["status"] == "degraded" and state["last_error"] == "unusable_answer"
    assert state["degraded_tasks"] == ["abstract"] and "heuristic facts written instead" in state["detail"]
    assert state["tasks"]["probe"]["status"] == "ok" and state["tasks"]["conflict"]["status"] == "ok"
    body = c.get("/api/v1/background/status").json()
    assert body["llm"]["status"] == "degraded" and body["failed"] == []
    assert [f["session_key"] for f in body["fallback"]] == ["s1"]
    assert "unusable_answer" in body["fallback"][0]["detail"] and "no facts" in body["fallback"][0]["detail"]

    weave(c, "s2")  # abstraction itself works again: the state clears, the record of s1 stays
    assert services.abstract_session(session_id=session(world["a"].org, "s2").id)["facts"] == 4
    assert L.llm_state()["status"] == "ok" and L.llm_state()["detail"] == ""
    body = c.get("/api/v1/background/status").json()
    assert body["llm"]["status"] == "ok" and [f["session_key"] for f in body["fallback"]] == ["s1"]


def test_an_abstraction_refused_every_time_does_not_flip_back_to_ok(world, client_for, llm):
    server = llm.need_script()
    weave(client_for(world["a"].key), "s1")
    server.push(400)  # e.g. context length exceeded: deterministic, not retried
    assert services.abstract_session(session_id=session(world["a"].org, "s1").id)["status"] == "failed"
    for _ in range(2):
        judge_once(world["a"].org)
        state = L.probe()
        assert state["status"] == "degraded" and state["last_error"] == "bad_request"
        assert state["degraded_tasks"] == ["abstract"]


def test_newest_failure_is_the_last_error(world, llm):
    server = llm.need_script()
    server.push(402)
    assert L.probe()["last_error"] == "out_of_credit"
    server.push(401)
    with pytest.raises(L.LlmError):
        judge_once(world["a"].org)
    state = L.llm_state()
    assert state["last_error"] == "unauthorized" and state["degraded_tasks"] == ["conflict", "probe"]
    judge_once(world["a"].org)
    assert L.llm_state()["degraded_tasks"] == ["probe"]
    L.probe()
    assert L.llm_state()["status"] == "ok"
