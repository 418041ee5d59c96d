"""``nylon weave`` run twice on the same plain-text file wrote every turn twice: the default session is
the input's hash "so a re-run resumes", but plain-text turns carry no event_id and the server dedupes
on nothing else. The CLI now derives an event_id for each turn without one (``with_event_ids``): a
re-run is a replay (200, nothing written) and an edited turn is a new memory, never a 409."""

from __future__ import annotations

import json

import pytest
from nylon_sdk import Client, Turn, with_event_ids

from memory.models import Node

from .test_cli import nylon
from .test_cli_first_user import _env

pytestmark = pytest.mark.django_db(transaction=True)


def _texts(org) -> list[str]:
    return sorted(Node.objects.filter(org=org).values_list("text", flat=True))


def test_weaving_the_same_text_file_again_writes_nothing(nylon_server, world, tmp_path):
    env = _env(tmp_path, NYLON_URL=nylon_server.url, NYLON_API_KEY=world["a"].key)
    f = tmp_path / "f.txt"
    f.write_text("Standup: a\nStandup: b\n")
    first = nylon("weave", str(f), "--quiet", env=env)
    assert first.returncode == 0, first.stderr
    assert "(2 nodes: 2 new, 0 already stored)" in first.stdout
    again = nylon("weave", str(f), "--quiet", env=env)
    assert again.returncode == 0, again.stderr
    assert "(2 nodes: 0 new, 2 already stored)" in again.stdout, again.stdout
    assert _texts(world["a"].org) == ["Standup: a", "Standup: b"]
    # stdin is the same input: the same session, the same ids
    out = nylon("weave", "--quiet", "--json", env=env, stdin="Standup: a\nStandup: b\n")
    assert out.returncode == 0 and json.loads(out.stdout)["created"] == 0, (out.stdout, out.stderr)
    assert Node.objects.filter(org=world["a"].org).count() == 2


def test_repeated_lines_are_each_kept_and_replayed(nylon_server, world, tmp_path):
    env = _env(tmp_path, NYLON_URL=nylon_server.url, NYLON_API_KEY=world["a"].key)
    f = tmp_path / "f.txt"
    f.write_text("ok\nDeploy done.\nok\n")
    for _ in range(2):
        out = nylon("weave", str(f), "--quiet", env=env)
        assert out.returncode == 0, out.stderr
    assert _texts(world["a"].org) == ["Deploy done.", "ok", "ok"]


def test_an_edited_file_with_the_same_session_writes_only_new_and_changed_turns(nylon_server, world, tmp_path):
    env = _env(tmp_path, NYLON_URL=nylon_server.url, NYLON_API_KEY=world["a"].key)
    f = tmp_path / "f.txt"
    f.write_text("Standup: a\nStandup: b\n")
    assert nylon("weave", str(f), "--session", "daily", "--quiet", env=env).returncode == 0
    f.write_text("Standup: first\nStandup: a\nStandup: b, edited\n")  # a line inserted, one edited
    out = nylon("weave", str(f), "--session", "daily", "--quiet", env=env)
    assert out.returncode == 0, out.stderr  # a changed line is a new id, not a 409 event_id_reused
    assert "(3 nodes: 2 new, 1 already stored)" in out.stdout, out.stdout
    assert _texts(world["a"].org) == ["Standup: a", "Standup: b", "Standup: b, edited", "Standup: first"]

    # Without --session an edited file is another input: another session, every turn written.
    out = nylon("weave", str(f), "--quiet", "--json", env=env)
    assert out.returncode == 0 and json.loads(out.stdout)["created"] == 3, (out.stdout, out.stderr)
    assert json.loads(out.stdout)["session_key"] != "daily"


def test_jsonl_turns_keep_their_own_event_id(nylon_server, world, tmp_path):
    env = _env(tmp_path, NYLON_URL=nylon_server.url, NYLON_API_KEY=world["a"].key)
    f = tmp_path / "turns.jsonl"
    f.write_text(json.dumps({"text": "Marco prefers the window seat.", "event_id": "m1"}) + "\n"
                 + json.dumps({"text": "Marco is allergic to peanuts.", "speaker": "marco"}) + "\n")
    for _ in range(2):
        out = nylon("weave", str(f), "--quiet", env=env)
        assert out.returncode == 0, out.stderr
    ids = dict(Node.objects.filter(org=world["a"].org).values_list("text", "event_id"))
    assert len(ids) == 2 and ids["Marco prefers the window seat."] == "m1"
    assert ids["Marco is allergic to peanuts."].startswith("cli-")


def test_with_event_ids_is_stable_keeps_given_ids_and_ignores_line_numbers():
    turns = ["a", Turn(text="b", event_id="mine"), {"text": "a"}, {"text": "a", "speaker": "x"}]
    first = with_event_ids("s", turns)
    assert [t.event_id for t in first] == [t.event_id for t in with_event_ids("s", turns)]
    assert first[1].event_id == "mine" and first[0].event_id.startswith("auto-")
    assert len({t.event_id for t in first}) == 4  # a repeat, or another speaker, is another turn
    assert with_event_ids("other", ["a"])[0].event_id != first[0].event_id
    inserted = with_event_ids("s", ["new", *turns])
    assert [t.event_id for t in inserted[1:]] == [t.event_id for t in first]
    assert with_event_ids("s", ["a, edited"])[0].event_id != first[0].event_id


def test_sdk_weave_session_with_derived_ids_is_a_replay(nylon_server, world):
    with Client(nylon_server.url, world["a"].key) as sdk:
        turns = with_event_ids("chat-9", ["Ana owns billing.", "Ben is on call."])
        assert sdk.weave_session("chat-9", turns).created == 2
        assert sdk.weave_session("chat-9", turns).created == 0
    assert Node.objects.filter(org=world["a"].org).count() == 2
