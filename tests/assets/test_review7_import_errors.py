"""Every import error is ``line N: column: message``, found before anything is written. Before,
values the checks did not know reached the database and the 400 carried its words (a not-null
violation on "memory_node", pgvector's dimension count, Django's float cast, the JSON parser's
"Expecting value: line 1 column 1"), most of them without a line number."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from assets.models import Asset, AssetVersion, AuditEvent
from memory.models import Edge, Node

from .helpers import create_asset, weave

pytestmark = pytest.mark.django_db

HEADER = {"type": "header", "format": "nylon-export", "version": 1, "org": "alpha"}


@pytest.fixture
def rows(world, client_for) -> list[dict]:
    """An org admin's export of alpha: header, two nodes, the edge between them, an asset and its version."""
    admin = client_for(world["a"].admin)
    weave(admin, "The Orion deal closes in June.", visibility="org", session="s")
    weave(admin, "Orion legal review is on Tuesday.", visibility="org", session="s")
    create_asset(admin, kind="wiki", title="Orion", body="closing plan", visibility="org")
    out = [json.loads(x) for x in b"".join(admin.get("/api/v1/export").streaming_content).decode().splitlines()]
    assert [r["type"] for r in out][:3] == ["header", "node", "node"]
    assert {"edge", "asset", "asset_version"} <= {r["type"] for r in out}
    return out


def _counts(org) -> tuple[int, ...]:
    return tuple(m.objects.filter(org=org).count() for m in (Node, Edge, Asset, AssetVersion))


def _post(client, lines: list):
    text = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)
    return client.post("/api/v1/import", {"jsonl": text}, format="json")


def _first(rows, kind) -> int:
    return next(i for i, r in enumerate(rows) if r["type"] == kind)


def _without(row: dict, name: str) -> dict:
    return {k: v for k, v in row.items() if k != name}


NODE_CASES = [
    ("no-occurred-at", lambda r: _without(r, "occurred_at"), "occurred_at: This field is required."),
    ("null-occurred-at", lambda r: {**r, "occurred_at": None}, "occurred_at: This field may not be null."),
    ("bad-time", lambda r: {**r, "occurred_at": "yesterday"}, "occurred_at: Expected an ISO 8601 date and time."),
    ("no-text", lambda r: _without(r, "text"), "text: This field is required."),
    ("int-text", lambda r: {**r, "text": 5}, "text: Expected a string."),
    ("nul-text", lambda r: {**r, "text": "a\x00b"}, "text: A string may not contain NUL characters."),
    ("embedding-dim", lambda r: {**r, "embedding": [1, 2]}, "embedding: Expected 384 numbers, got 2."),
    ("embedding-type", lambda r: {**r, "embedding": "x"}, "embedding: Expected a list of numbers or null."),
    ("confidence", lambda r: {**r, "confidence": "high"}, "confidence: Expected a number."),
    ("seq", lambda r: {**r, "seq": "first"}, "seq: Expected a whole number."),
    ("seq-range", lambda r: {**r, "seq": 2 ** 40}, "seq: Ensure this value is less than or equal to 2147483647."),
    ("speaker-long", lambda r: {**r, "speaker": "x" * 500},
     "speaker: Ensure this value has at most 200 characters (it has 500)."),
    ("tags-items", lambda r: {**r, "tags": [1]}, "tags: Item 1: Expected a string."),
    ("metadata", lambda r: {**r, "metadata": []}, "metadata: Expected a JSON object."),
    ("embedded", lambda r: {**r, "embedded": "yes"}, "embedded: Expected true or false."),
    ("id", lambda r: {**r, "id": "a"}, "id: Expected the row's id in the exported org (a whole number)."),
    ("no-id", lambda r: _without(r, "id"), "id: This field is required."),
    ("owner", lambda r: {**r, "owner_user": 7}, "owner_user: Expected a name (a string) or null."),
    ("sources", lambda r: {**r, "source_node_ids": ["x"]}, 'source_node_ids: Item "x": Expected a whole number.'),
]


@pytest.mark.parametrize("change,message", [c[1:] for c in NODE_CASES], ids=[c[0] for c in NODE_CASES])
def test_a_bad_node_value_is_a_400_naming_line_and_column_and_writes_nothing(world, client_for, rows, change,
                                                                            message):
    a = world["a"]
    before, events = _counts(a.org), AuditEvent.objects.filter(org=a.org, action="org.import").count()
    i = 2  # the second node: the first, valid, would have been written before it
    bad = [*rows[:i], change(rows[i]), *rows[i + 1:]]
    r = _post(client_for(a.admin), bad)
    assert r.status_code == 400, r.content
    assert r.json()["error"]["fields"]["jsonl"] == [f"line {i + 1}: {message}"]
    assert _counts(a.org) == before
    assert AuditEvent.objects.filter(org=a.org, action="org.import").count() == events


OTHER_CASES = [
    ("edge-weight", "edge", lambda r: {**r, "weight": "heavy"}, "weight: Expected a number."),
    ("edge-no-src", "edge", lambda r: _without(r, "src"), "src: This field is required."),
    ("asset-no-title", "asset", lambda r: _without(r, "title"), "title: This field is required."),
    ("asset-node-ids", "asset", lambda r: {**r, "node_ids": "1,2"}, "node_ids: Expected a list."),
    ("asset-approver", "asset", lambda r: {**r, "approved_by": ["x"]},
     "approved_by: Expected a name (a string) or null."),
    ("version-no-asset", "asset_version", lambda r: _without(r, "asset"), "asset: This field is required."),
    ("version-number", "asset_version", lambda r: {**r, "version": 1.5}, "version: Expected a whole number."),
]


@pytest.mark.parametrize("kind,change,message", [c[1:] for c in OTHER_CASES], ids=[c[0] for c in OTHER_CASES])
def test_bad_edge_asset_and_version_values_name_line_and_column(world, client_for, rows, kind, change, message):
    a = world["a"]
    before = _counts(a.org)
    i = _first(rows, kind)
    r = _post(client_for(a.admin), [*rows[:i], change(rows[i]), *rows[i + 1:]])
    assert r.status_code == 400, r.content
    assert r.json()["error"]["fields"]["jsonl"] == [f"line {i + 1}: {message}"]
    assert _counts(a.org) == before


@pytest.mark.parametrize("line,message", [
    ("not json", "json: Not valid JSON (Expecting value at column 1)."),
    ("{broken", "json: Not valid JSON (Expecting property name enclosed in double quotes at column 2)."),
    ("[1, 2]", "json: Every line must be a JSON object."),
    ('{"type": "wormhole"}', 'type: Unknown row type: "wormhole".'),
], ids=["text", "broken", "list", "type"])
def test_a_line_that_is_no_row_is_named_by_its_number(world, client_for, rows, line, message):
    a = world["a"]
    before = _counts(a.org)
    r = _post(client_for(a.admin), [*rows[:3], line, *rows[3:]])
    assert r.status_code == 400, r.content
    assert r.json()["error"]["fields"]["jsonl"] == [f"line 4: {message}"]
    assert _counts(a.org) == before


def test_a_missing_header_is_line_one(world, client_for, rows):
    r = _post(client_for(world["a"].admin), rows[1:])
    assert r.status_code == 400
    assert r.json()["error"]["fields"]["jsonl"] == [
        "line 1: type: Not a Nylon export (format header missing or unsupported)."]


def test_every_bad_line_is_listed_and_the_command_says_the_same(world, client_for, rows, tmp_path):
    a = world["a"]
    before = _counts(a.org)
    bad = [rows[0], {**rows[1], "confidence": "high"}, "not json", _without(rows[2], "occurred_at"), *rows[3:]]
    r = _post(client_for(a.admin), bad)
    assert r.status_code == 400
    assert r.json()["error"]["fields"]["jsonl"] == [
        "line 2: confidence: Expected a number.",
        "line 3: json: Not valid JSON (Expecting value at column 1).",
        "line 4: occurred_at: This field is required.",
    ]
    f = tmp_path / "bad.jsonl"
    f.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in bad))
    with pytest.raises(CommandError, match=r"^line 2: confidence: Expected a number\. \(and 2 more\)$"):
        call_command("import_memory", "--org", "alpha", str(f))
    assert _counts(a.org) == before
