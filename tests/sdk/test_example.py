"""examples/agent_loop.py (SDK mode): run 1 tells a fact, run 2 — a new process — recalls it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nylon_project.live import ROOT

pytestmark = pytest.mark.django_db(transaction=True)


def run_agent(server, key: str, message: str, *extra: str, env: dict | None = None) -> str:
    env = {**os.environ, "NYLON_URL": server.url, "NYLON_API_KEY": key, **(env or {})}
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "agent_loop.py"), message, *extra],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_agent_remembers_across_runs(nylon_server, world):
    key = world["a"].key
    assert run_agent(nylon_server, key, "My locker code is 4417.") == "Got it, I'll remember that."
    assert "4417" in run_agent(nylon_server, key, "What is my locker code?")
    # another org's agent has no such memory
    assert run_agent(nylon_server, world["b"].key, "What is my locker code?") == \
        "I don't remember anything about that."
