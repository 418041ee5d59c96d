"""examples/agent_loop.py through the memory proxy: the agent is a plain OpenAI client; run 2 (a
new process) answers from what the proxy wrote back after run 1."""

from __future__ import annotations

import pytest

from tests.sdk.test_example import run_agent

from .test_proxy import _wait_for_leaves

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def test_agent_through_the_proxy_remembers_across_runs(proxy_server, scripted, world):
    key = world["a"].key
    env = {"OPENAI_API_KEY": "sk-agent-loop"}
    first = run_agent(proxy_server, key, "Remember that the office wifi password is crimson-otter.", "--proxy",
                      env=env)
    assert first.startswith("Noted:")
    _wait_for_leaves(proxy_server, key, ["office wifi password is crimson-otter"])
    second = run_agent(proxy_server, key, "What is the office wifi password?", "--proxy", env=env)
    assert "crimson-otter" in second
    assert scripted.requests[-1]["headers"]["authorization"] == "Bearer sk-agent-loop"
