"""An upstream that fails after the connection is made (mid-body, or on the follow-up request of a
memory-tool round) answers the caller the proxy's 502 ``upstream_unavailable`` error shape, never
Django's HTML 500; a stream whose status line is already sent ends with the protocol's error event.

In process: the view runs under Django's AsyncClient and the upstream is an httpx MockTransport,
so every failure is exact and immediate (no sockets, no worker)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from proxy import views

from .inprocess import call

# the proxy checks the key and builds the context in executor threads: they must see the world
pytestmark = pytest.mark.django_db(transaction=True)

OPENAI_URL = "/proxy/openai/v1/chat/completions"
ANTHROPIC_URL = "/proxy/anthropic/v1/messages"
MESSAGES = [{"role": "user", "content": "When does the staging password rotate?"}]
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


class _BreaksAfter(httpx.AsyncByteStream):
    """A response body that yields its first chunks, then the connection drops."""

    def __init__(self, chunks: list[bytes]):
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        raise httpx.ReadError("connection reset by peer")


@pytest.fixture
def upstream(monkeypatch, settings) -> Callable[[Callable], list[httpx.Request]]:
    """Route the proxy to a MockTransport handler; returns the requests it received."""
    settings.NYLON_PROXY_BUDGET_MS = 20000  # the first request of an org builds its cache

    def install(handler: Callable[[httpx.Request], httpx.Response]) -> list[httpx.Request]:
        seen: list[httpx.Request] = []

        def record(request: httpx.Request) -> httpx.Response:
            seen.append(request)
            return handler(request)

        client = httpx.AsyncClient(transport=httpx.MockTransport(record))
        monkeypatch.setattr(views, "_upstream_client", lambda: client)
        return seen

    return install


def _post(world, url: str, body: dict):
    return call(world, "POST", url, body)


def _assert_502(response, content: bytes, memory: str) -> None:
    assert response.status_code == 502, content[:200]
    assert response["Content-Type"] == "application/json"
    error = json.loads(content)["error"]
    assert error["code"] == "upstream_unavailable" and error["message"]
    assert response["X-Nylon-Memory"] == memory


@pytest.mark.parametrize(("url", "body"), [
    (OPENAI_URL, {"model": "gpt-test", "messages": MESSAGES}),
    (ANTHROPIC_URL, {"model": "claude-test", "max_tokens": 50, "messages": MESSAGES}),
])
def test_body_read_error_is_a_502(world, upstream, url, body):
    seen = upstream(lambda request: httpx.Response(
        200, headers={"content-type": "application/json"}, stream=_BreaksAfter([b'{"id": "chatcmpl-1", "cho'])))
    response, content = _post(world, url, body)
    _assert_502(response, content, "injected")
    assert len(seen) == 1


def test_tool_round_follow_up_failure_is_a_502(world, upstream):
    tool_call = {"id": "chatcmpl-tool", "object": "chat.completion", "model": "gpt-test", "choices": [{
        "index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "memory_resonate", "arguments": json.dumps({"query": "staging"})}}]}}]}

    def handler(request: httpx.Request) -> httpx.Response:
        if len(seen) == 1:
            return httpx.Response(200, json=tool_call)
        raise httpx.ConnectError("connection refused", request=request)

    seen = upstream(handler)
    response, content = _post(world, OPENAI_URL, {"model": "gpt-test", "tools": [WEATHER], "messages": MESSAGES})
    _assert_502(response, content, "injected")
    assert len(seen) == 2  # the proxy answered memory_resonate and sent the follow-up
    assert json.loads(seen[1].content)["messages"][-1]["role"] == "tool"


def test_tool_round_follow_up_read_error_is_a_502(world, upstream):
    tool_use = {"id": "msg_tool", "type": "message", "role": "assistant", "model": "claude-test",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "memory_resonate",
                             "input": {"query": "staging"}}], "stop_reason": "tool_use"}

    def handler(request: httpx.Request) -> httpx.Response:
        if len(seen) == 1:
            return httpx.Response(200, json=tool_use)
        return httpx.Response(200, headers={"content-type": "application/json"}, stream=_BreaksAfter([b'{"id"']))

    seen = upstream(handler)
    response, content = _post(world, ANTHROPIC_URL, {
        "model": "claude-test", "max_tokens": 50, "messages": MESSAGES,
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}]})
    _assert_502(response, content, "injected")
    assert len(seen) == 2


def _sse_events(content: bytes) -> list[tuple[str, str]]:
    """(event name, data) of each SSE event, the way SDK decoders split them."""
    out = []
    for block in content.decode().split("\n\n"):
        name = data = ""
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data = line[5:].strip()
        if name or data:
            out.append((name, data))
    return out


def test_openai_stream_cut_mid_answer_ends_with_an_error_event(world, upstream):
    chunk = {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "The "}}]}
    # the second chunk is cut mid-event: the error event must still parse on its own
    upstream(lambda request: httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=_BreaksAfter(
        [f"data: {json.dumps(chunk)}\n\n".encode(), b'data: {"id": "c", "obj'])))
    response, content = _post(world, OPENAI_URL, {"model": "gpt-test", "stream": True, "messages": MESSAGES})
    assert response.status_code == 200 and response["X-Nylon-Memory"] == "injected"
    events = _sse_events(content)
    assert json.loads(events[0][1]) == chunk  # what arrived before the failure was relayed
    name, data = events[-1]
    error = json.loads(data)["error"]  # the OpenAI SDKs raise APIError on a data event with "error"
    assert name == "" and error["code"] == "upstream_unavailable"
    assert b"[DONE]" not in content  # not dressed up as a finished answer


def test_anthropic_stream_cut_mid_answer_ends_with_an_error_event(world, upstream):
    start = {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": []}}
    upstream(lambda request: httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=_BreaksAfter(
        [f"event: message_start\ndata: {json.dumps(start)}\n\n".encode()])))
    response, content = _post(world, ANTHROPIC_URL, {"model": "claude-test", "max_tokens": 50, "stream": True,
                                                      "messages": MESSAGES})
    assert response.status_code == 200
    events = _sse_events(content)
    assert events[0][0] == "message_start"
    name, data = events[-1]
    payload = json.loads(data)  # Anthropic's own error event, which its SDKs raise
    assert name == "error" and payload["type"] == "error"
    assert payload["error"]["type"] == "api_error" and payload["error"]["code"] == "upstream_unavailable"
    assert b"message_stop" not in content


def test_stream_failing_after_its_last_event_adds_no_error(world, upstream):
    """A connection reset after ``[DONE]`` lost nothing: the caller's answer stays a clean one."""
    done = b'data: {"id": "c", "choices": [{"index": 0, "delta": {"content": "Monday."}}]}\n\ndata: [DONE]\n\n'
    upstream(lambda request: httpx.Response(200, headers={"content-type": "text/event-stream"},
                                            stream=_BreaksAfter([done])))
    response, content = _post(world, OPENAI_URL, {"model": "gpt-test", "stream": True, "messages": MESSAGES})
    assert response.status_code == 200 and content == done
