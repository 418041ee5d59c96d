"""A provider (or an OpenAI-compatible gateway) answering 200 with a body of an unexpected shape:
never a raw exception out of the task — an LlmError ``bad_response``, so the failure path runs
(state degraded with a detail, attempt counted, heuristic or rule fallback)."""

from __future__ import annotations

import json

import pytest

from memory.models import Node
from reflection import conflicts, services
from reflection import llm as L
from reflection.models import LlmUsage, SessionWork

from .conftest import point_settings_at
from .helpers import session, weave
from .test_conflicts import two_statements
from .test_reflect import abstracted

pytestmark = pytest.mark.django_db

OK = json.dumps({"ok": True})
SCHEMA = {"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}


@pytest.fixture
def gateway(settings, scripted_llm, monkeypatch):
    """The scripted server, speaking the protocol the test asks for."""

    def use(provider: str = "openai"):
        scripted_llm.reset()
        point_settings_at(settings, scripted_llm, provider)
        L.reset_state()
        return scripted_llm

    monkeypatch.setattr(L, "_sleep", lambda secs: None)
    yield use
    L.reset_state()


def ask(org):
    return L.complete_json(org=org, system=L.PROBE_SYSTEM, user="Reply.", schema=SCHEMA, max_tokens=64)


def openai_body(**choice) -> dict:
    return {"choices": [choice], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}


BAD_BODIES = [
    ("openai", {"choices": [OK]}, "choices[0] is a str"),
    ("openai", openai_body(message=OK), "choices[0].message is a str"),
    ("openai", openai_body(message={"role": "assistant", "content": {"ok": True}}), "content is a dict"),
    ("openai", {"choices": "nope"}, "choices is a str"),
    ("openai", {"id": "x", "object": "chat.completion"}, "no choices"),
    ("openai", [{"message": {"content": OK}}], "body is a list"),
    ("openai", openai_body(message={"content": [{"type": "text", "text": 1}]}), "text is not a string"),
    ("anthropic", {"content": [["text", OK]]}, "content[0] is a list"),
    ("anthropic", {"content": {"type": "text", "text": OK}}, "content is a dict"),
]


@pytest.mark.parametrize("provider,body,why", BAD_BODIES)
def test_unexpected_body_is_a_bad_response_and_shows(world, gateway, provider, body, why):
    server = gateway(provider)
    server.push(("raw", body))
    with pytest.raises(L.LlmError) as e:
        ask(world["a"].org)
    assert e.value.kind == "bad_response" and why in str(e.value) and e.value.http_status == 200
    assert len(server.requests) == 1  # the same gateway would answer the same shape: not retried here
    state = L.llm_state()
    assert state["status"] == "degraded" and state["last_error"] == "bad_response" and why in state["detail"]
    assert LlmUsage.objects.get(org=world["a"].org).errors == 1
    ask(world["a"].org)  # a normal answer flips it back
    assert L.llm_state()["status"] == "ok"


@pytest.mark.parametrize("provider,body", [
    # OpenAI-compatible gateways may send the content as a list of parts: the text parts are joined
    ("openai", openai_body(message={"role": "assistant", "content": [
        {"type": "text", "text": '{"ok":'}, {"type": "image_url", "image_url": {"url": "x"}},
        {"type": "text", "text": " true}"}]})),
    ("anthropic", {"content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": OK}],
                   "usage": {"input_tokens": 3, "output_tokens": 2}}),
])
def test_content_as_a_list_of_text_parts_is_read(world, gateway, provider, body):
    server = gateway(provider)
    server.push(("raw", body))
    assert ask(world["a"].org) == {"ok": True}
    assert L.llm_state()["status"] == "ok"
    usage = LlmUsage.objects.get(org=world["a"].org)
    assert (usage.calls, usage.prompt_tokens, usage.completion_tokens) == (1, 3, 2)


def test_unreadable_usage_costs_the_count_not_the_answer(world, gateway):
    """Accounting must not fail the work it accounts for: the answer is used, the bad count is
    not, and the state's detail says so."""
    server = gateway("openai")
    server.push(("raw", {"choices": [{"message": {"content": OK}}],
                         "usage": {"prompt_tokens": "n/a", "completion_tokens": 2.0}}))
    assert ask(world["a"].org) == {"ok": True}
    state = L.llm_state()
    assert state["status"] == "ok" and "usage not counted" in state["detail"] and "prompt_tokens" in state["detail"]
    usage = LlmUsage.objects.get(org=world["a"].org)
    assert (usage.calls, usage.prompt_tokens, usage.completion_tokens) == (1, 0, 2)
    ask(world["a"].org)
    assert L.llm_state()["detail"] == ""


def test_abstraction_with_a_bad_body_fails_visibly_and_is_not_retried_forever(world, client_for, gateway,
                                                                              settings):
    server = gateway("openai")
    settings.NYLON_ABSTRACTION_RETRY_SECS = 0
    settings.NYLON_ABSTRACTION_MAX_ATTEMPTS = 2
    c = client_for(world["a"].key)
    weave(c, "s1")
    s = session(world["a"].org, "s1")
    server.default = ("raw", {"choices": ["{}"]})
    assert services.abstract_session(session_id=s.id) == {"status": "failed", "error": "bad_response"}
    s.refresh_from_db()
    assert s.abstraction_status == "failed" and s.abstraction_attempts == 1
    assert "llm bad_response" in s.abstraction_error
    assert not Node.objects.filter(kind="fact").exists()
    body = c.get("/api/v1/background/status").json()
    assert body["llm"]["status"] == "degraded" and body["llm"]["last_error"] == "bad_response"
    assert body["llm"]["detail"] and body["failed"][0]["session_key"] == "s1"
    assert s.id in services.tick()["abstract"]
    # the last attempt: the turns get the heuristic facts, visibly, and the tick has nothing left
    out = services.abstract_session(session_id=s.id)
    assert out["status"] == "done" and out["source"] == "heuristic" and out["fallback"] == 3
    s.refresh_from_db()
    assert s.abstraction_status == "done" and s.abstraction_attempts == 0
    assert "gave up after 2 attempts" in s.abstraction_error
    body = c.get("/api/v1/background/status").json()
    assert body["failed"] == [] and body["fallback"][0]["session_key"] == "s1"
    assert body["llm"]["status"] == "degraded" and body["llm"]["last_error"] == "bad_response"
    assert s.id not in services.tick()["abstract"]  # not re-sent every tick


def test_conflict_judge_with_a_bad_body_keeps_the_rule_verdict(world, client_for, gateway):
    server = gateway("openai")
    first, second = two_statements(world, client_for)
    server.default = ("raw", openai_body(message='{"contradicts": false, "reason": "x"}'))
    assert conflicts.detect(org_id=world["a"].org.id, node_ids=[second]) == 1
    c = conflicts.Conflict.objects.get()
    assert (c.node_a_id, c.node_b_id, c.detector) == (first, second, "rule")
    assert L.llm_state()["last_error"] == "bad_response"


def test_reflection_with_a_bad_body_fails_and_counts_the_attempt(world, client_for, gateway):
    server = gateway("anthropic")
    s = abstracted(world, client_for)
    server.default = ("raw", {"content": "nope", "usage": []})  # a bare string is read as text: not JSON
    assert services.reflect_session(session_id=s.id)["status"] == "failed"
    server.default = ("raw", {"content": {"text": "{}"}})
    assert services.reflect_session(session_id=s.id) == {"status": "failed", "error": "bad_response"}
    s.refresh_from_db()
    work = SessionWork.objects.get(session=s)
    assert s.reflection_status == "failed" and work.reflection_attempts == 2
    assert "bad_response" in work.reflection_detail


def test_probe_reports_a_bad_body_as_degraded(world, gateway, client):
    from reflection.tasks import llm_probe

    server = gateway("openai")
    server.push(("raw", {"choices": [None]}))
    assert llm_probe()["status"] == "degraded"
    assert client.get("/healthz").json()["checks"]["llm"]["last_error"] == "bad_response"
