"""An LLM outage reaches the agents: while the org's LLM is degraded (here a scripted LLM answering
402), /context and MCP memory_context name "llm" in degraded with a reason, and the context text
says facts may be missing. /healthz and background/status said so; the context said degraded: []."""

from __future__ import annotations

import pytest

from assets import mcp
from assets.context import LLM_DEGRADED
from memory.cache import get_cache
from reflection import llm, services
from teams.auth import authenticate_key
from tests.reflection.helpers import session
from tests.reflection.helpers import weave as weave_session
from tests.reflection.llm_server import ScriptedLlm

from .helpers import weave

pytestmark = pytest.mark.django_db


@pytest.fixture
def scripted(settings, monkeypatch):
    """The scripted LLM of tests/reflection (OpenAI protocol), backoff recorded instead of slept."""
    server = ScriptedLlm()
    settings.NYLON_LLM_URL = server.url
    settings.NYLON_LLM_PROVIDER = "openai"
    settings.NYLON_LLM_MODEL = "scripted-1"
    settings.NYLON_LLM_KEY = server.key
    settings.NYLON_LLM_TIMEOUT_SECS = 1.0
    settings.NYLON_LLM_MAX_RETRIES = 2
    monkeypatch.setattr(llm, "_sleep", lambda secs: None)
    llm.reset_state()
    get_cache().drop()
    yield server
    llm.reset_state()
    get_cache().drop()
    server.close()


def test_an_llm_out_of_credit_shows_in_the_context(world, client_for, scripted):
    a = world["a"]
    c = client_for(a.key)
    nid = weave(c, "The Alfama venue is booked for March 14.")
    ok = c.post("/api/v1/context", {"query": "When is the Alfama venue booked?"}, format="json").json()
    assert "llm" not in ok["degraded"] and "llm" not in ok["degraded_reasons"]

    weave_session(c, "s1")
    scripted.default = 402  # out of credit: the abstraction writes no facts
    services.abstract_session(session_id=session(a.org, "s1").id)
    assert c.get("/api/v1/background/status").json()["llm"]["status"] == "degraded"  # what health says

    body = c.post("/api/v1/context", {"query": "When is the Alfama venue booked?"}, format="json").json()
    assert "llm" in body["degraded"] and "out_of_credit" in body["degraded_reasons"]["llm"]
    assert "facts" in body["degraded_reasons"]["llm"]
    note = LLM_DEGRADED["en"].format(error="out_of_credit")
    assert body["dynamic"].startswith(note) and f"[memory {nid}]" in body["dynamic"]
    assert body["stable_hash"] == ok["stable_hash"]  # the stable prefix is untouched
    text = str(body)
    assert scripted.key not in text and scripted.url not in text and "Insufficient Balance" not in text
    # without a query too, and through MCP with the same text
    bare = c.get("/api/v1/context").json()
    assert "llm" in bare["degraded"] and bare["dynamic"] == note
    via_mcp = mcp.tool_context(authenticate_key(a.key), query="When is the Alfama venue booked?")
    assert "llm" in via_mcp["degraded"] and f"\n\n{note}" in via_mcp["context"]  # first in the dynamic part
    # the state is per LLM: an org that turned the instance's LLM off is not told of its outage
    b = world["b"]
    b.org.settings = {**(b.org.settings or {}), "llm": {"enabled": False}}
    b.org.save(update_fields=["settings"])
    assert "llm" not in client_for(b.key).get("/api/v1/context").json()["degraded"]

    # the LLM back and the same kind of work succeeding: the context stops saying it
    scripted.default = "json"
    services.abstract_session(session_id=session(a.org, "s1").id)
    again = c.post("/api/v1/context", {"query": "When is the Alfama venue booked?"}, format="json").json()
    assert "llm" not in again["degraded"] and not again["dynamic"].startswith("(Note")


def test_no_llm_configured_is_not_degraded(world, client_for, settings):
    settings.NYLON_LLM_URL = ""  # heuristics by choice: nothing is failing
    body = client_for(world["a"].key).get("/api/v1/context").json()
    assert body["degraded"] == [] and body["degraded_reasons"] == {} and body["dynamic"] == ""
