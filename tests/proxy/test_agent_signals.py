"""What the proxy tells the agent: the upstream's model list at ``/models`` (JSON errors for any
other unknown proxy path), a write-back skipped for a read-only key said in a header, and memory
tools mentioned in the injected text only when the request carries them."""

from __future__ import annotations

import httpx
import openai
import pytest

from .test_proxy import CALLER_OPENAI, FACT, _anthropic, _openai, _seed

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

GUIDE_WORDS = ("memory_resonate", "memory_get", "memory_weave", "## Memory tools", "at most 3")


def test_models_are_relayed_from_the_upstream(proxy_server, scripted, world):
    client = _openai(proxy_server, world["a"].key)
    assert [m.id for m in client.models.list()] == ["gpt-test", "claude-test"]
    assert client.models.retrieve("gpt-test").id == "gpt-test"
    req = scripted.requests[0]
    assert req["path"] == "/v1/models"
    assert req["headers"]["authorization"] == "Bearer sk-caller-openai-123"  # the caller's, verbatim
    assert "x-nylon-key" not in req["headers"]

    r = httpx.get(f"{proxy_server.url}/proxy/anthropic/v1/models",
                  headers={"X-Nylon-Key": world["a"].key, "x-api-key": "sk-ant"})
    assert r.status_code == 200 and r.json()["data"][1]["id"] == "claude-test"


def test_models_need_a_valid_nylon_key(proxy_server, scripted, world):
    with pytest.raises(openai.AuthenticationError):
        _openai(proxy_server, "nyl_bogus_key").models.list()
    r = httpx.get(f"{proxy_server.url}/proxy/openai/v1/models")
    assert r.status_code == 401 and r.json()["error"]["code"] == "not_authenticated"
    assert scripted.requests == []


@pytest.mark.parametrize("path", ["/proxy/openai/v1/embeddings", "/proxy/openai/v1/nope", "/proxy/"])
def test_unknown_proxy_paths_are_json_errors(proxy_server, world, path):
    r = httpx.post(f"{proxy_server.url}{path}", headers={"X-Nylon-Key": world["a"].key}, json={})
    assert r.status_code == 404 and r.headers["content-type"].startswith("application/json")
    assert r.json()["error"]["code"] == "no_endpoint" and r.json()["request_id"]


@pytest.fixture
def read_only_key(world):
    from teams import services
    from teams.models import Scope

    _, key = services.api_key_create(actor=None, agent=world["a"].agent, name="reader", scopes=[Scope.READ])
    return key


def test_a_read_only_key_is_told_its_turns_are_not_stored(proxy_server, scripted, world, read_only_key):
    _seed(proxy_server, world["a"].key)
    raw = _openai(proxy_server, read_only_key).chat.completions.with_raw_response.create(
        model="gpt-test", messages=CALLER_OPENAI)
    assert raw.headers["x-nylon-memory"] == "injected"  # memory is still read for it
    assert raw.headers["x-nylon-writeback"] == "skipped; reason=read-only-key"
    with _openai(proxy_server, read_only_key).chat.completions.with_streaming_response.create(
            model="gpt-test", messages=CALLER_OPENAI, stream=True) as resp:
        assert resp.headers["x-nylon-writeback"] == "skipped; reason=read-only-key"
        list(resp.parse())
    # a key that may write gets no such header
    raw = _openai(proxy_server, world["a"].key).chat.completions.with_raw_response.create(
        model="gpt-test", messages=CALLER_OPENAI)
    assert "x-nylon-writeback" not in raw.headers


def test_memory_tools_are_mentioned_only_when_attached(proxy_server, scripted, world):
    _seed(proxy_server, world["a"].key)
    client = _openai(proxy_server, world["a"].key)
    client.chat.completions.create(model="gpt-test", messages=CALLER_OPENAI)
    with client.chat.completions.with_streaming_response.create(
            model="gpt-test", messages=CALLER_OPENAI, stream=True,
            tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]) as resp:
        list(resp.parse())  # a stream gets no memory tools, even when it offers its own
    _anthropic(proxy_server, world["a"].key).messages.create(
        model="claude-test", max_tokens=20, messages=[{"role": "user", "content": CALLER_OPENAI[-1]["content"]}])
    plain, stream, anthropic_req = scripted.requests
    for system in (plain["body"]["messages"][0]["content"], stream["body"]["messages"][0]["content"],
                   anthropic_req["body"]["system"]):
        assert FACT in system  # memory still injected
        assert not [w for w in GUIDE_WORDS if w in system], system
    assert "tools" not in plain["body"] and "tools" not in anthropic_req["body"]

    scripted.reset()
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    client.chat.completions.create(model="gpt-test", messages=CALLER_OPENAI, tools=[weather])
    sent = scripted.requests[0]["body"]
    assert [t["function"]["name"] for t in sent["tools"]][1:] == ["memory_resonate", "memory_get", "memory_weave"]
    assert all(w in sent["messages"][0]["content"] for w in GUIDE_WORDS)


def test_a_read_only_key_is_offered_no_memory_weave(proxy_server, scripted, world, read_only_key):
    _seed(proxy_server, world["a"].key)
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    _openai(proxy_server, read_only_key).chat.completions.create(model="gpt-test", messages=CALLER_OPENAI,
                                                                 tools=[weather])
    sent = scripted.requests[0]["body"]
    assert [t["function"]["name"] for t in sent["tools"]] == ["get_weather", "memory_resonate", "memory_get"]
    system = sent["messages"][0]["content"]
    assert "memory_resonate" in system and "memory_weave" not in system  # the guide without it, too
