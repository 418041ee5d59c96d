"""Credentials in the LLM URL (``https://user:pass@gateway``) must not be displayed: background/status
is readable by every agent key, and /healthz details by monitoring."""

from __future__ import annotations

import json

import pytest

from nylon_project import health
from reflection import llm as L

from .conftest import point_settings_at

pytestmark = pytest.mark.django_db

SECRET = "s3cr3t-pass"


@pytest.fixture
def llm_with_creds(settings, scripted_llm, monkeypatch):
    scripted_llm.reset()
    # anthropic: its key travels in x-api-key, so the URL's userinfo does not replace it
    point_settings_at(settings, scripted_llm, "anthropic")
    settings.NYLON_LLM_URL = scripted_llm.url.replace("http://", f"http://llmuser:{SECRET}@")
    monkeypatch.setattr(L, "_sleep", lambda s: None)
    L.reset_state()
    yield scripted_llm
    L.reset_state()


def test_userinfo_never_displayed(world, client_for, llm_with_creds):
    port = llm_with_creds.httpd.server_address[1]
    assert L.probe()["status"] == "ok"
    state = L.llm_state()
    assert state["endpoint"] == f"127.0.0.1:{port}"
    body = client_for(world["a"].key).get("/api/v1/background/status").json()
    assert body["llm"]["endpoint"] == f"127.0.0.1:{port}"
    assert SECRET not in json.dumps(body) and "llmuser" not in json.dumps(body)
    assert SECRET not in json.dumps(health._llm(), default=str)


def test_userinfo_not_in_an_error_detail(world, settings, llm_with_creds):
    settings.NYLON_LLM_URL = f"http://llmuser:{SECRET}@127.0.0.1:1"  # nothing listens there
    settings.NYLON_LLM_MAX_RETRIES = 0
    state = L.probe()
    assert state["status"] == "degraded" and state["last_error"] == "connection"
    assert state["endpoint"] == "127.0.0.1:1" and SECRET not in json.dumps(state, default=str)


@pytest.mark.parametrize("url,shown", [
    ("https://u:p@gw.example:8443/v1", "gw.example:8443"),
    ("https://gw.example/v1", "gw.example"),
    ("u:p@gw.example:8443/v1", "gw.example:8443"),
    ("https://a@b:p@gw.example", "gw.example"),
])
def test_display_host(url, shown):
    assert L.display_host(url) == shown
