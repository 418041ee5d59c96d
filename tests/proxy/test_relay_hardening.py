"""What the proxy relays, both ways, is bounded. The model-list relay joined the (already
percent-decoded) model id onto the upstream URL: ``GET /proxy/openai/v1/models/..%2F..%2Fsecret%2Fpath``
made the upstream receive ``GET /secret/path`` with the caller's credentials. And the upstream's
``Set-Cookie`` reached the caller, to be stored for Nylon's host. Now a model id is one path segment
(else 400, nothing sent) and cookies and hop-by-hop headers stay with the proxy, on the model list
and on the chat routes, streams included.

In process: the view under Django's AsyncClient, the upstream an httpx MockTransport."""

from __future__ import annotations

import json

import httpx
import pytest

from proxy import views

from .inprocess import call

# the proxy checks the key and builds the context in executor threads: they must see the world
pytestmark = pytest.mark.django_db(transaction=True)

UPSTREAM = "http://upstream.test/v1"
ANSWER = {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test", "choices": [
    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Mondays."}}]}
STREAM = (b'data: {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": '
          b'{"content": "Mondays."}, "finish_reason": null}]}\n\ndata: [DONE]\n\n')
# what a provider (or anything between it and Nylon) may add to its answers
UPSTREAM_HEADERS = [("set-cookie", "__cf_bm=abc; path=/; HttpOnly"), ("set-cookie", "sess=1; path=/"),
                    ("alt-svc", 'h3=":443"; ma=86400'), ("connection", "x-hop"), ("x-hop", "1"),
                    ("x-upstream", "scripted")]


@pytest.fixture
def upstream(monkeypatch, settings) -> list[httpx.Request]:
    settings.NYLON_PROXY_BUDGET_MS = 20000  # the first request of an org builds its cache
    settings.NYLON_PROXY_OPENAI_UPSTREAM = UPSTREAM
    settings.NYLON_PROXY_ANTHROPIC_UPSTREAM = UPSTREAM
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": []}, headers=UPSTREAM_HEADERS)
        if json.loads(request.content).get("stream"):
            return httpx.Response(200, content=STREAM,
                                  headers=[("content-type", "text/event-stream"), *UPSTREAM_HEADERS])
        return httpx.Response(200, json=ANSWER, headers=UPSTREAM_HEADERS)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    monkeypatch.setattr(views, "_upstream_client", lambda: client)
    # No stats or write-back (not under test): their threads would race the flush at teardown.
    monkeypatch.setattr(views, "_background", lambda fn, /, *args, **kwargs: None)
    return seen




@pytest.mark.parametrize("model", [
    "..%2F..%2Fsecret%2Fpath",  # decoded by the router to ../../secret/path: the audit's request
    "..%252F..%252Fsecret",  # double-encoded: decoded once, it must not be decoded again upstream
    "gpt%252Fx", "..", ".", "gpt-4o%5C..%5Cx", "a%09b",
])
def test_a_model_id_that_is_not_one_path_segment_is_refused_and_not_sent(world, upstream, model):
    for base in ("/proxy/openai/v1/models/", "/proxy/anthropic/v1/models/"):
        r, content = call(world, "GET", base + model)
        assert r.status_code == 400, (model, r.status_code, content[:200])
        assert json.loads(content)["error"]["code"] == "invalid"
    assert upstream == []


def test_a_model_id_goes_upstream_as_one_encoded_segment(world, upstream):
    r, _ = call(world, "GET", "/proxy/openai/v1/models/ft:gpt-4o-mini:acme:v1")
    assert r.status_code == 200
    r, _ = call(world, "GET", "/proxy/openai/v1/models/gpt%3Fx=1%23y")  # '?' and '#' in the id
    assert r.status_code == 200
    r, _ = call(world, "GET", "/proxy/anthropic/v1/models?limit=5")
    assert r.status_code == 200
    assert [(q.url.raw_path.decode(), q.headers["authorization"]) for q in upstream] == [
        ("/v1/models/ft:gpt-4o-mini:acme:v1", "Bearer sk-up"),
        ("/v1/models/gpt%3Fx=1%23y", "Bearer sk-up"),  # still the model's own path, no query
        ("/v1/models?limit=5", "Bearer sk-up"),
    ]


def _assert_relayed_without_cookies(r) -> None:
    assert r["x-upstream"] == "scripted"  # the upstream's own headers still come back
    for name in ("Set-Cookie", "Alt-Svc", "X-Hop", "Connection"):
        assert not r.has_header(name), (name, r[name])
    assert not r.cookies


def test_upstream_cookies_and_hop_by_hop_headers_never_reach_the_caller(world, upstream):
    r, _ = call(world, "GET", "/proxy/openai/v1/models")
    assert r.status_code == 200
    _assert_relayed_without_cookies(r)
    messages = [{"role": "user", "content": "When does the staging password rotate?"}]
    r, content = call(world, "POST", "/proxy/openai/v1/chat/completions",
                       {"model": "gpt-test", "messages": messages})
    assert r.status_code == 200 and json.loads(content) == ANSWER
    _assert_relayed_without_cookies(r)
    r, content = call(world, "POST", "/proxy/openai/v1/chat/completions",
                       {"model": "gpt-test", "messages": messages, "stream": True})
    assert r.status_code == 200 and r.streaming and content == STREAM
    _assert_relayed_without_cookies(r)
    assert len(upstream) == 3
