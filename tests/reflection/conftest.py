"""LLM fixtures: a scripted server on loopback (both wire protocols), and — when NYLON_LLM_URL is
set in the environment — the same tests against that real endpoint."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from .llm_server import ScriptedLlm

REAL_URL = os.environ.get("NYLON_LLM_URL", "")
MODES = ["scripted-openai", "scripted-anthropic"] + (["real"] if REAL_URL else [])


@dataclass
class LlmTarget:
    mode: str
    server: ScriptedLlm | None
    sleeps: list

    @property
    def scripted(self) -> bool:
        return self.server is not None

    def need_script(self) -> ScriptedLlm:
        if self.server is None:
            pytest.skip("scripted error case: not reproducible against a real endpoint")
        return self.server


@pytest.fixture(scope="session")
def scripted_llm():
    server = ScriptedLlm()
    yield server
    server.close()


def point_settings_at(settings, server: ScriptedLlm, provider: str = "openai") -> None:
    settings.NYLON_LLM_URL = server.url
    settings.NYLON_LLM_PROVIDER = provider
    settings.NYLON_LLM_MODEL = "scripted-1"
    settings.NYLON_LLM_KEY = server.key
    settings.NYLON_LLM_TIMEOUT_SECS = 1.0
    settings.NYLON_LLM_MAX_RETRIES = 2
    settings.NYLON_LLM_RETRY_AFTER_MAX_SECS = 5


@pytest.fixture(params=MODES)
def llm(request, settings, scripted_llm, monkeypatch):
    """The LLM under test: the scripted server (OpenAI or Anthropic protocol) or the real one."""
    from reflection import llm as llm_mod

    sleeps: list[float] = []
    if request.param == "real":
        target = LlmTarget("real", None, sleeps)
    else:
        scripted_llm.reset()
        point_settings_at(settings, scripted_llm, request.param.split("-", 1)[1])
        monkeypatch.setattr(llm_mod, "_sleep", sleeps.append)  # backoff is recorded, not slept
        target = LlmTarget(request.param, scripted_llm, sleeps)
    llm_mod.reset_state()
    yield target
    llm_mod.reset_state()


@pytest.fixture
def no_llm(settings):
    settings.NYLON_LLM_URL = ""
