"""``manage.py mcp_stdio`` fed by a pipe that closes right after the last request: every request
read before end of input is answered (the tool of a lost answer still ran, so a client could not
even tell its write had happened)."""

from __future__ import annotations

import json
import subprocess

import pytest

from memory.models import Node

from .test_mcp import ROOT, _params

pytestmark = pytest.mark.django_db(transaction=True)


def _line(obj: dict) -> str:
    return json.dumps(obj) + "\n"


def test_requests_piped_before_end_of_input_are_all_answered(world):
    a = world["a"]
    requests = "".join([
        _line({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                          "clientInfo": {"name": "pipe", "version": "1"}}}),
        _line({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        _line({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "memory_weave", "arguments": {"text": "Piped note: Mona uses vim."}}}),
        _line({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "memory_resonate", "arguments": {"query": "vim"}}}),
    ])
    p = _params(a.key)
    r = subprocess.run([p.command, *p.args], input=requests, env=p.env, cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    replies = {m["id"]: m for m in map(json.loads, r.stdout.splitlines())}
    assert sorted(replies) == [1, 2, 3], r.stdout
    woven = replies[2]["result"]
    assert not woven.get("isError"), woven
    node_id = json.loads(woven["content"][0]["text"])["node_ids"][0]
    assert Node.objects.get(pk=node_id).text == "Piped note: Mona uses vim."
    assert not replies[3]["result"].get("isError")


def test_end_of_input_with_nothing_pending_still_exits(world):
    p = _params(world["a"].key)
    r = subprocess.run([p.command, *p.args], input="", env=p.env, cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout == ""


