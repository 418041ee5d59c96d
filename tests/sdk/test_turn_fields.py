"""A turn's fields reach the API or are refused, never dropped. The SDK and the CLI kept only the turn
fields they knew: ``{"text": …, "visibility": "private"}`` was written with the agent's default
visibility (org-wide here), a typo (``speakr``) or a ``"bogus"`` key passed without a word, and the
CLI sent a ``{"session_key": "obj", "turns": […]}`` file to ``cli-<hash>``.

The API takes visibility and team_id per request, not per turn: a turn naming them is written with
them when every turn sent together agrees, and refused (nothing written) when they differ."""

from __future__ import annotations

import json

import pytest
from nylon_sdk import Client, NotFound, Turn, TurnFieldError
from nylon_sdk.cli import read_input

from memory.models import Node
from teams import services as team_services
from teams.models import Agent

from .test_cli import nylon
from .test_cli_first_user import _env

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def org_wide(world):
    """Org a's agent writing org-wide by default (as in the report), and another agent of the org
    with its own key: the reader a private memory must be kept from."""
    a = world["a"]
    Agent.objects.filter(pk=a.agent.pk).update(default_visibility="org")
    other = Agent.objects.create(org=a.org, name="alpha-other", default_visibility="org")
    _, other_key = team_services.api_key_create(actor=None, agent=other, name="test")
    return a, other_key


def _assert_private(server, node: Node, other_key: str, member_client) -> None:
    assert node.visibility == "private", node.visibility
    with Client(server.url, other_key, max_retries=0) as other, pytest.raises(NotFound):
        other.get_node(node.id)
    assert member_client.get(f"/api/v1/memories/nodes/{node.id}").status_code == 404


# -- SDK -----------------------------------------------------------------------------------------

def test_sdk_private_turn_is_stored_private(nylon_server, org_wide, client_for):
    a, other_key = org_wide
    with Client(nylon_server.url, a.key, max_retries=0) as nylon:
        shared = nylon.weave_session("sdk-default", ["The standup moved to 10:00."])
        assert nylon.get_node(shared.node_ids[0]).visibility == "org"  # the agent's default, as reported

        res = nylon.weave_session("sdk-vis", [{"text": "The vault pin is 8812.", "visibility": "private"}])
        assert nylon.get_node(res.node_ids[0]).visibility == "private"
        # a Turn naming it, and every turn of the call agreeing
        res2 = nylon.weave_session("sdk-vis-2", [Turn("Door code 4471.", visibility="private"),
                                                 {"text": "Alarm code 9930.", "visibility": "private"}])
    for node_id in res.node_ids + res2.node_ids:
        _assert_private(nylon_server, Node.objects.get(pk=node_id), other_key, client_for(a.member))


def test_sdk_unknown_turn_field_is_refused_and_nothing_written(nylon_server, org_wide):
    a, _ = org_wide
    with Client(nylon_server.url, a.key, max_retries=0) as nylon:
        with pytest.raises(TurnFieldError, match=r"unknown turn field 'speakr' \(did you mean 'speaker'\?") as exc:
            nylon.weave_session("sdk-vis", [{"text": "... pin 8812", "visibility": "private", "speakr": "typo"}])
        assert exc.value.field == "speakr" and isinstance(exc.value, ValueError)
        with pytest.raises(TurnFieldError, match=r"unknown turn field 'bogus'"):
            nylon.weave_session("sdk-vis", ["fine", {"text": "x", "bogus": 1}])
    assert not Node.objects.filter(org=a.org).exists()


def test_sdk_turns_of_differing_visibility_are_refused_and_nothing_written(nylon_server, org_wide):
    a, _ = org_wide
    with Client(nylon_server.url, a.key, max_retries=0) as nylon:
        with pytest.raises(TurnFieldError, match=r"turn 1: visibility 'private' differs from turn 0's") as exc:
            nylon.weave_session("mixed", ["Lunch is at noon.", {"text": "Pin 8812.", "visibility": "private"}])
        assert exc.value.index == 1
        with pytest.raises(TurnFieldError, match=r"turn 0: visibility 'private' differs from the visibility "
                                                 r"argument \('org'\)"):
            nylon.weave_session("mixed", [{"text": "Pin 8812.", "visibility": "private"}], visibility="org")
    assert not Node.objects.filter(org=a.org).exists()


# -- CLI -----------------------------------------------------------------------------------------

def test_cli_private_turns_are_stored_private(nylon_server, org_wide, client_for, tmp_path):
    a, other_key = org_wide
    env = _env(tmp_path, NYLON_URL=nylon_server.url, NYLON_API_KEY=a.key)
    f = tmp_path / "turns.jsonl"
    f.write_text("".join(json.dumps({"text": t, "visibility": "private"}) + "\n"
                         for t in ("jsonl one", "jsonl two")))
    out = nylon("weave", str(f), "--session", "jl", "--quiet", env=env)
    assert out.returncode == 0, out.stderr
    doc = tmp_path / "session.json"
    doc.write_text(json.dumps({"session_key": "obj-private", "visibility": "private", "turns": ["doc one"]}))
    out = nylon("weave", str(doc), "--quiet", env=env)
    assert out.returncode == 0, out.stderr
    nodes = list(Node.objects.filter(org=a.org))
    assert sorted(n.text for n in nodes) == ["doc one", "jsonl one", "jsonl two"]
    for node in nodes:
        _assert_private(nylon_server, node, other_key, client_for(a.member))



def test_cli_single_turn_document_keeps_the_files_visibility(nylon_server, org_wide, tmp_path):
    a, _ = org_wide
    env = _env(tmp_path, NYLON_URL=nylon_server.url, NYLON_API_KEY=a.key)
    doc = tmp_path / "session.json"
    doc.write_text(json.dumps({"session_key": "obj-private", "visibility": "private",
                               "turns": {"text": "The vault pin is 8812."}}))
    out = nylon("weave", str(doc), "--quiet", env=env)
    assert out.returncode == 0, out.stderr
    node = Node.objects.get(org=a.org)
    assert (node.session_key, node.visibility) == ("obj-private", "private")


def test_single_turn_document_keeps_every_document_field():
    # "turns" as one object is read as a list of one: every field of the document is kept with it
    as_object = read_input('{"session_key": "s", "visibility": "private", "team_id": 7, "end_session": true,\n'
                           ' "turns": {"text": "The vault pin is 8812."}}', "session.json")
    as_list = read_input('{"session_key": "s", "visibility": "private", "team_id": 7, "end_session": true,\n'
                         ' "turns": [{"text": "The vault pin is 8812."}]}', "session.json")
    assert as_object == as_list
    assert (as_object.session_key, as_object.visibility, as_object.team_id, as_object.end_session) == \
        ("s", "private", 7, True)
    assert [t.text for t in as_object.turns] == ["The vault pin is 8812."] and as_object.lines == [2]


@pytest.mark.parametrize("via", ["file", "stdin"])
def test_cli_document_after_a_byte_order_mark_keeps_its_fields(nylon_server, org_wide, tmp_path, via):
    # A BOM (Notepad, PowerShell's Out-File) hid the "{": the whole document, pin included, was
    # woven as one plain-text turn with the agent's default (org-wide) visibility.
    a, _ = org_wide
    env = _env(tmp_path, NYLON_URL=nylon_server.url, NYLON_API_KEY=a.key)
    body = json.dumps({"session_key": "bom", "visibility": "private", "turns": [{"text": "The vault pin is 8812."}]})
    if via == "file":
        doc = tmp_path / "session.json"
        doc.write_bytes(b"\xef\xbb\xbf" + body.encode())
        out = nylon("weave", str(doc), "--quiet", env=env)
    else:
        out = nylon("weave", "-", "--quiet", env=env, stdin="\ufeff" + body)
    assert out.returncode == 0, out.stderr
    node = Node.objects.get(org=a.org)
    assert (node.session_key, node.visibility, node.text) == ("bom", "private", "The vault pin is 8812.")


def test_plain_text_after_a_byte_order_mark_does_not_start_with_it():
    given = read_input("\ufeffPriya is on call.\nThe release is Thursday.\n")
    assert [t.text for t in given.turns] == ["Priya is on call.", "The release is Thursday."]
    assert given.lines == [1, 2]

def test_cli_differing_visibility_is_refused_by_line(nylon_server, org_wide, tmp_path):
    a, _ = org_wide
    env = _env(tmp_path, NYLON_URL=nylon_server.url, NYLON_API_KEY=a.key)
    f = tmp_path / "turns.jsonl"
    f.write_text('{"text":"jsonl one"}\n{"text":"jsonl two","visibility":"private"}\n{"text":"jsonl three"}\n')
    out = nylon("weave", str(f), "--session", "jl", "--quiet", env=env)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert f"{f}:2: visibility 'private' differs from line 1's" in out.stderr and "nothing was written" in out.stderr
    # the flag does not overrule a private turn either
    f.write_text('{"text":"jsonl two","visibility":"private"}\n')
    out = nylon("weave", str(f), "--visibility", "org", "--quiet", env=env)
    assert out.returncode == 1 and f"{f}:1: visibility 'private' differs from --visibility ('org')" in out.stderr
    doc = tmp_path / "session.json"
    doc.write_text(json.dumps({"session_key": "obj", "visibility": "private", "turns": ["a"]}))
    out = nylon("weave", str(doc), "--visibility", "org", "--quiet", env=env)
    assert out.returncode == 1 and "--visibility 'org' differs from the file's visibility 'private'" in out.stderr
    assert not Node.objects.filter(org=a.org).exists()


def test_cli_unknown_field_is_refused_by_line(nylon_server, org_wide, tmp_path):
    a, _ = org_wide
    env = _env(tmp_path, NYLON_URL=nylon_server.url, NYLON_API_KEY=a.key)
    f = tmp_path / "turns.jsonl"
    f.write_text('{"text":"jsonl one"}\n{"text":"jsonl two","bogus":1}\n')
    out = nylon("weave", str(f), "--quiet", env=env)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert f"{f}:2: unknown turn field 'bogus'" in out.stderr and "nothing was written" in out.stderr
    # in a pretty-printed document, the line the turn starts on; and a document's own unknown field
    doc = tmp_path / "turns.json"
    doc.write_text('{\n  "session_key": "obj",\n  "turns": [\n    "fine",\n    {"text": "x",\n     "speakr": "typo"}\n  ]\n}\n')
    out = nylon("weave", str(doc), "--quiet", env=env)
    assert out.returncode == 1 and f"{doc}:5: unknown turn field 'speakr' (did you mean 'speaker'?" in out.stderr
    doc.write_text('{\n  "turns": ["fine"],\n  "sesion_key": "obj"\n}\n')
    out = nylon("weave", str(doc), "--quiet", env=env)
    assert out.returncode == 1 and f"{doc}:3: unknown field 'sesion_key'" in out.stderr, out.stderr
    assert not Node.objects.filter(org=a.org).exists()


def test_cli_uses_the_files_session_key(nylon_server, world, tmp_path):
    env = _env(tmp_path, NYLON_URL=nylon_server.url, NYLON_API_KEY=world["a"].key)
    doc = tmp_path / "session.json"
    doc.write_text(json.dumps({"session_key": "obj", "turns": ["Ada owns billing.", {"text": "Bo owns search."}]}))
    out = nylon("weave", str(doc), "--quiet", "--json", env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["session_key"] == "obj"
    assert set(Node.objects.filter(org=world["a"].org).values_list("session_key", flat=True)) == {"obj"}
    # run again: the same session, so a replay that writes nothing
    out = nylon("weave", str(doc), "--quiet", "--json", env=env)
    assert out.returncode == 0 and json.loads(out.stdout)["created"] == 0, (out.stdout, out.stderr)
    # an explicit --session wins
    out = nylon("weave", str(doc), "--session", "flag", "--quiet", "--json", env=env)
    assert out.returncode == 0 and json.loads(out.stdout)["session_key"] == "flag", out.stderr
    assert Node.objects.filter(org=world["a"].org, session_key="flag").count() == 2
