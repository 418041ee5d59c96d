"""NYLON_PROXY_MAX_HIT_CHARS and NYLON_PROXY_MAX_HITS_CHARS were read by the settings and passed
by docker-compose as the proxy's "injection caps", but nothing used them: the proxy injected recall
under the context's default budget (600 characters a memory, 3,000 in all) whatever they said. Now
they are the proxy's recall budget, with NYLON_PROXY_HITS_K as its item count.

In process: the view under Django's AsyncClient, the upstream an httpx MockTransport."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from django.conf import settings as django_settings

from assets.context import Budget
from memory.services import TurnIn, weave_session
from proxy import views
from teams.auth import actor_for_agent
from teams.models import Scope

from .inprocess import call

# the proxy checks the key and builds the context in executor threads: they must see the world
pytestmark = pytest.mark.django_db(transaction=True)

UPSTREAM = "http://upstream.test/v1"
ANSWER = {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test", "choices": [
    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Mondays."}}]}
LINE = re.compile(r"^- \[[^\]]*\] \[memory (\d+)\] (.*)$", re.M)


@pytest.fixture
def upstream(monkeypatch, settings) -> list[httpx.Request]:
    settings.NYLON_PROXY_BUDGET_MS = 20000  # the first request of an org builds its cache
    settings.NYLON_PROXY_OPENAI_UPSTREAM = UPSTREAM
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=ANSWER)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    monkeypatch.setattr(views, "_upstream_client", lambda: client)
    # No stats or write-back (not under test): their threads would race the flush at teardown.
    monkeypatch.setattr(views, "_background", lambda fn, /, *args, **kwargs: None)
    return seen


def _seed(world, n: int) -> None:
    actor = actor_for_agent(world["a"].agent, scopes=frozenset({Scope.READ, Scope.WRITE}))
    filler = " The rotation is logged in the ops channel and the old password stops working an hour later." * 12
    for i in range(n):
        text = f"Staging database password rotation note {i}: every Monday at 09:00.{filler}"
        weave_session(actor=actor, turns=[TurnIn(text=text, speaker="ops")], session_key=f"ops-{i}")


def _recalled(world, upstream) -> list[str]:
    r, content = call(world, "POST", "/proxy/openai/v1/chat/completions", {
        "model": "gpt-test", "messages": [{"role": "user", "content": "When does the staging database password rotate?"}]})
    assert r.status_code == 200, content[:300]
    assert r.headers["X-Nylon-Memory"] == "injected"
    system = json.loads(upstream[-1].content)["messages"][0]["content"]
    return [text for _, text in LINE.findall(system.split("<nylon_memory>", 1)[1])]


def test_the_proxy_cuts_recall_to_its_injection_caps(world, upstream, settings):
    _seed(world, 6)
    settings.NYLON_PROXY_HITS_K = 4
    settings.NYLON_PROXY_MAX_HIT_CHARS = 300
    settings.NYLON_PROXY_MAX_HITS_CHARS = 700
    texts = _recalled(world, upstream)
    assert texts, "nothing recalled"
    assert all(len(t) <= 300 for t in texts), [len(t) for t in texts]
    assert sum(len(t) for t in texts) <= 700, [len(t) for t in texts]
    assert len(texts) == 3  # 300 + 300 + the 100 left (a useful part of the third); the fourth does not fit

    settings.NYLON_PROXY_MAX_HIT_CHARS = 1200
    settings.NYLON_PROXY_MAX_HITS_CHARS = 20000
    texts = _recalled(world, upstream)
    assert len(texts) == 4  # NYLON_PROXY_HITS_K
    assert max(len(t) for t in texts) > 600  # past the context's default per-memory cap


def test_the_defaults_are_the_context_budget_of_before():
    """Wiring the caps in changed nothing for a proxy left at its defaults."""
    default = Budget()
    assert django_settings.NYLON_PROXY_MAX_HIT_CHARS == default.max_chars_per_memory
    assert django_settings.NYLON_PROXY_MAX_HITS_CHARS == default.max_recall_chars
    assert django_settings.NYLON_PROXY_HITS_K == default.max_recall_items
