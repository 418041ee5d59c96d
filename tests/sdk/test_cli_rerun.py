"""``nylon weave`` run again on the same file resumes it: its default session was ``cli-<time>``, so a
re-run sent the stored turns' event_ids with another session and every one was refused (409
``event_id_reused``). The default is now the input's hash. And two inputs that crashed the CLI: a
``{"turns": …}`` that is not a list, and conflict sides without a parsable time."""

from __future__ import annotations

import json

import pytest
from nylon_sdk.cli import newer_side, read_turns

from memory.models import Node

from .test_cli import nylon
from .test_cli_first_user import _env

pytestmark = pytest.mark.django_db(transaction=True)


def test_weaving_the_same_file_again_replays_it(nylon_server, world, tmp_path):
    env = _env(tmp_path, NYLON_URL=nylon_server.url, NYLON_API_KEY=world["a"].key)
    turns = tmp_path / "turns.jsonl"
    turns.write_text("".join(json.dumps({"text": f"Turn {i} of the import.", "event_id": f"imp-{i}"}) + "\n"
                             for i in range(3)))
    first = nylon("weave", str(turns), "--quiet", "--json", env=env)
    assert first.returncode == 0, first.stderr
    again = nylon("weave", str(turns), "--quiet", "--json", env=env)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["session_key"] == json.loads(first.stdout)["session_key"]
    assert Node.objects.filter(org=world["a"].org).count() == 3


def test_turns_that_are_not_a_list_are_a_clear_error():
    with pytest.raises(ValueError, match=r"turns.json: expected a list of turns"):
        read_turns('{\n  "turns": "hello"\n}\n', "turns.json")


def test_a_broken_first_json_line_is_named_as_the_first():
    """JSON lines whose first line lacks its "}": the error named line 2 (where the whole-document
    parse broke); a document over many lines still names where it breaks."""
    text = '{"text": "Broken first line", "speaker": "a"\n{"text": "fine"}\n'
    with pytest.raises(ValueError, match=r"^in.jsonl:1: not valid JSON"):
        read_turns(text, "in.jsonl")
    with pytest.raises(ValueError, match=r"^in.jsonl:2: not valid JSON"):
        read_turns('{"text": "fine"}\n{"text": "broken"\n', "in.jsonl")
    with pytest.raises(ValueError, match=r"^doc.json:3: not valid JSON"):
        read_turns('{\n  "turns": [\n    {"text": "a",}\n  ]\n}\n', "doc.json")


def test_the_newer_side_with_a_time_missing_or_without_a_zone():
    class C:
        node_a = {"id": 1, "occurred_at": None}
        node_b = {"id": 2, "occurred_at": "2026-11-10T10:00:00+00:00"}

    assert newer_side(C())[0]["id"] == 2
    C.node_a = {"id": 1, "occurred_at": "2026-11-12T10:00:00"}  # no zone: read as UTC
    assert newer_side(C())[0]["id"] == 1
