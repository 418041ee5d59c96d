from __future__ import annotations

from datetime import date

import pytest

from reflection import llm as L
from reflection.models import LlmUsage

pytestmark = pytest.mark.django_db

SCHEMA = {"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}


def ask(org=None, **kw):
    return L.complete_json(org=org, system=L.PROBE_SYSTEM, user='Reply with {"ok": true}.', schema=SCHEMA,
                           max_tokens=64, **kw)


def test_normal_json_answer_is_validated_and_usage_recorded(world, llm):
    org = world["a"].org
    assert ask(org) == {"ok": True}
    state = L.llm_state()
    assert state["status"] == "ok" and state["provider"] in L.PROVIDERS
    usage = LlmUsage.objects.get(org=org, day=date.today())
    assert usage.calls == 1 and usage.errors == 0
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    if llm.scripted:
        req = llm.server.requests[-1]
        assert req["key"] == llm.server.key and req["task"] == "probe"
        if llm.mode.endswith("openai"):
            assert req["path"] == "/v1/chat/completions"
            assert req["body"]["response_format"] == {"type": "json_object"}
        else:
            assert req["path"] == "/v1/messages" and req["body"]["max_tokens"] == 64


def test_truncated_json_is_retried_once_then_reported(world, llm):
    server = llm.need_script()
    server.push("truncated", "json")
    assert ask(world["a"].org) == {"ok": True}  # one retry recovers
    server.push("truncated", "truncated")
    with pytest.raises(L.LlmError) as e:
        ask(world["a"].org)
    assert e.value.kind == "malformed_json" and "truncated" in str(e.value)
    state = L.llm_state()
    assert state["status"] == "degraded" and state["last_error"] == "malformed_json"


def test_schema_mismatch_is_malformed(world, llm):
    server = llm.need_script()
    server.push(("json", {"ok": "yes"}), ("json", {"nope": 1}))
    with pytest.raises(L.LlmError) as e:
        ask(world["a"].org)
    assert e.value.kind == "malformed_json" and "schema" in str(e.value)


@pytest.mark.parametrize("code,kind", [(401, "unauthorized"), (402, "out_of_credit")])
def test_auth_and_credit_errors_are_not_retried(world, llm, code, kind):
    server = llm.need_script()
    server.push(code)
    with pytest.raises(L.LlmError) as e:
        ask(world["a"].org)
    assert e.value.kind == kind and e.value.http_status == code
    assert len(server.requests) == 1
    state = L.llm_state()
    assert state["status"] == "degraded" and state["last_error"] == kind and state["http_status"] == code
    assert LlmUsage.objects.get(org=world["a"].org).errors == 1
    ask(world["a"].org)  # recovery flips the state back
    assert L.llm_state()["status"] == "ok"


def test_wrong_key_is_401(world, llm, settings):
    llm.need_script()
    settings.NYLON_LLM_KEY = "wrong"
    with pytest.raises(L.LlmError) as e:
        ask()
    assert e.value.kind == "unauthorized"


def test_429_honours_retry_after_then_succeeds(world, llm):
    server = llm.need_script()
    server.push((429, 3), 503)
    assert ask(world["a"].org) == {"ok": True}
    assert len(server.requests) == 3
    assert llm.sleeps[0] == 3.0  # Retry-After honoured
    assert 0 < llm.sleeps[1] <= 8  # exponential backoff with jitter for the 503


def test_429_beyond_the_cap_and_exhausted_retries(world, llm):
    server = llm.need_script()
    server.push((429, 3600))
    with pytest.raises(L.LlmError) as e:
        ask(world["a"].org)
    assert e.value.kind == "rate_limited" and len(server.requests) == 1  # not slept for an hour
    server.default = 500
    with pytest.raises(L.LlmError) as e:
        ask(world["a"].org)
    assert e.value.kind == "server_error" and len(server.requests) == 1 + 3  # 1 + max_retries (2)
    assert L.llm_state()["last_error"] == "server_error"


def test_slow_answer_beyond_the_timeout(world, llm):
    server = llm.need_script()
    server.push(("slow", 1.5), ("slow", 1.5), ("slow", 1.5))
    with pytest.raises(L.LlmError) as e:
        ask(world["a"].org)
    assert e.value.kind == "timeout"
    assert L.llm_state()["last_error"] == "timeout"


def test_disabled_when_nothing_configured(world, no_llm):
    assert L.llm_state()["status"] == "disabled"
    with pytest.raises(L.LlmDisabled):
        ask(world["a"].org)


def test_per_org_override_and_opt_out(world, no_llm, scripted_llm):
    scripted_llm.reset()
    org_a, org_b = world["a"].org, world["b"].org
    org_a.settings = {"llm": {"url": scripted_llm.url, "provider": "anthropic", "model": "m",
                              "key": scripted_llm.key, "timeout_secs": 2}}
    org_a.save()
    assert L.config_for(org_a).endpoint == scripted_llm.url + "/v1/messages"
    assert ask(org_a) == {"ok": True}
    assert L.llm_state(org_a)["status"] == "ok"
    assert L.llm_state(org_b)["status"] == "disabled" and L.llm_state()["status"] == "disabled"
    org_a.settings = {"llm": {"enabled": False}}
    assert L.config_for(org_a) is None


def test_probe_task_and_healthz_show_the_shared_state(world, llm, client):
    from reflection.tasks import llm_probe

    if llm.scripted:
        llm.server.push(402)
        assert llm_probe()["status"] == "degraded"
        body = client.get("/healthz").json()
        assert body["checks"]["llm"]["last_error"] == "out_of_credit" and "llm" in body["degraded"]
    assert llm_probe()["status"] == "ok"
    assert client.get("/healthz").json()["checks"]["llm"]["status"] == "ok"


@pytest.mark.parametrize("url,provider,endpoint", [
    ("https://api.deepseek.com", "openai", "https://api.deepseek.com/v1/chat/completions"),
    ("http://localhost:11434/v1", "openai", "http://localhost:11434/v1/chat/completions"),
    ("http://h:8080/v1/chat/completions", "openai", "http://h:8080/v1/chat/completions"),
    ("https://api.anthropic.com", "anthropic", "https://api.anthropic.com/v1/messages"),
])
def test_endpoints(url, provider, endpoint):
    assert L.LlmConfig(provider=provider, url=url, model="m").endpoint == endpoint


def test_validator_and_json_extraction():
    schema = {"type": "object", "required": ["facts"], "additionalProperties": False, "properties": {
        "facts": {"type": "array", "maxItems": 2, "items": {"type": "object", "required": ["text"],
                                                             "properties": {"text": {"type": "string",
                                                                                     "minLength": 1}}}}}}
    L.validate({"facts": [{"text": "x"}]}, schema)
    for bad in ({"facts": [{"text": ""}]}, {"facts": [{}]}, {"facts": [{"text": "a"}] * 3}, {"facts": 1},
                {"facts": [], "extra": 1}, []):
        with pytest.raises(ValueError):
            L.validate(bad, schema)
    assert L.parse_json_text('```json\n{"a": 1}\n```') == {"a": 1}
    assert L.parse_json_text('Here you go: {"a": 1} hope it helps') == {"a": 1}
    with pytest.raises(L.LlmError):
        L.parse_json_text('{"a": ')
