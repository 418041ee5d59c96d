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
    from memory.models import Node
    from reflection import conflicts

    key = world["a"].key
    assert run_agent(nylon_server, key, "My locker code is 4417.") == "Got it, I'll remember that."
    assert run_agent(nylon_server, key, "What is my locker code?") == "From memory: My locker code is 4417."
    # The code changes: the change contradicts the old code (the worker's conflict check, run here),
    # and the next run answers with the new one, not a restatement of its own earlier reply.
    assert run_agent(nylon_server, key, "My locker code changed to 9021.") == "Got it, I'll remember that."
    changed = Node.objects.get(org=world["a"].org, text="My locker code changed to 9021.")
    assert conflicts.detect(org_id=world["a"].org.id, node_ids=[changed.id]) == 1
    assert run_agent(nylon_server, key, "What is my locker code?") == "From memory: My locker code changed to 9021."
    assert not Node.objects.filter(org=world["a"].org, text__startswith="From memory").exists()
    # another org's agent has no such memory
    assert run_agent(nylon_server, world["b"].key, "What is my locker code?") == \
        "I don't remember anything about that."
