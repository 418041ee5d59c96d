"""The ``nylon`` console script against the real service."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.django_db(transaction=True)
NYLON = str(Path(sys.executable).parent / "nylon")


def nylon(*args: str, env: dict, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([NYLON, *args], input=stdin, env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=120)


def test_cli_end_to_end(nylon_server, world, tmp_path):
    cfg = tmp_path / "config.json"
    env = {"NYLON_CONFIG": str(cfg), "NYLON_URL": "", "NYLON_API_KEY": ""}
    out = nylon("--url", nylon_server.url, "--key", world["a"].key, "configure", env=env)
    assert out.returncode == 0 and json.loads(cfg.read_text()) == {"url": nylon_server.url,
                                                                    "api_key": world["a"].key}
    assert oct(cfg.stat().st_mode & 0o777) == "0o600"

    # plain text on stdin: one turn per line, with a progress bar on stderr
    out = nylon("weave", "--session", "standup", env=env,
                stdin="Priya is on call this week.\n\nThe release train leaves Thursday.\n")
    assert out.returncode == 0, out.stderr
    assert "woven 2 turns into session standup" in out.stdout and "2/2" in out.stderr

    jsonl = tmp_path / "turns.jsonl"
    jsonl.write_text("\n".join(json.dumps(t) for t in [
        {"text": "Marco prefers the window seat.", "speaker": "marco", "event_id": "m1"},
        {"text": "Marco is allergic to peanuts.", "speaker": "marco", "event_id": "m2"}]))
    out = nylon("weave", str(jsonl), "--session", "marco", "--json", "--quiet", env=env)
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)["node_ids"]) == 2 and out.stderr == ""
    listing = tmp_path / "turns.json"
    listing.write_text(json.dumps({"turns": ["Ada owns the billing service."]}))
    assert nylon("weave", str(listing), "--quiet", env=env).returncode == 0

    out = nylon("resonate", "Who is on call?", "-k", "3", env=env)
    assert out.returncode == 0, out.stderr
    header, rule, first = out.stdout.splitlines()[:3]
    assert header.split() == ["#", "score", "node", "kind", "why", "text"] and set(rule) <= {"-", " "}
    assert "Priya is on call" in first and "served by" in out.stdout

    out = nylon("resonate", "What is Marco allergic to?", "--json", env=env)
    doc = json.loads(out.stdout)
    assert "peanuts" in doc["hits"][0]["text"] and doc["hits"][0]["explanation"]["parts"]

    out = nylon("nodes", "list", "--json", env=env)
    nodes = json.loads(out.stdout)
    assert len(nodes) == 5
    out = nylon("nodes", "get", str(nodes[0]["id"]), env=env)
    assert json.loads(out.stdout)["id"] == nodes[0]["id"]
    assert nylon("nodes", "delete", str(nodes[0]["id"]), env=env).returncode == 0
    out = nylon("nodes", "get", str(nodes[0]["id"]), env=env)
    assert out.returncode == 1 and "404 not_found" in out.stderr

    out = nylon("conflicts", "list", env=env)
    assert out.returncode == 0 and out.stdout.splitlines()[0].split() == ["id", "status", "a", "b", "reason"]

    # errors: the API's message and fields; env beats the config file
    out = nylon("resonate", "x", "-k", "0", env=env)
    assert out.returncode == 1 and "400 invalid" in out.stderr and "k:" in out.stderr
    out = nylon("resonate", "x", env={**env, "NYLON_API_KEY": "nyl_bad_key"})
    assert out.returncode == 1 and "401" in out.stderr

    out = nylon("health", "--json", env=env)
    assert json.loads(out.stdout)["checks"]["database"]["status"] == "ok"


def test_cli_unreachable_service(tmp_path):
    out = nylon("health", env={"NYLON_CONFIG": str(tmp_path / "none.json"), "NYLON_URL": "http://127.0.0.1:9",
                               "NYLON_API_KEY": "k"})
    assert out.returncode == 3 and "error:" in out.stderr
