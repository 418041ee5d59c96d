"""``POST import`` takes what ``GET export`` answers: the file itself (``application/x-ndjson``), up
to ``NYLON_MAX_IMPORT_BYTES`` where other requests have 2 MiB. It took only ``{"jsonl": "<file>"}``:
the file posted as it was got a 415 (as JSON lines) or "Extra data: line 2" (as JSON), and any org of
more than a few hundred memories was over the 2 MiB every request had."""

from __future__ import annotations

import json

import pytest

from memory.models import Node

from .test_export_import import _populate, _twin_org

pytestmark = pytest.mark.django_db


def _export(client) -> bytes:
    r = client.get("/api/v1/export")
    assert r.status_code == 200
    return b"".join(r.streaming_content)


def _big_file(world, client_for, size: int) -> bytes:
    """An export grown past ``size`` bytes with more node rows like its own (new ids, event ids and
    texts of 10,000 characters)."""
    a = world["a"]
    rows = [json.loads(x) for x in _export(client_for(a.admin)).decode().splitlines()]
    node = next(x for x in rows if x["type"] == "node")
    extra, i = [], 0
    while sum(len(json.dumps(x)) for x in extra) < size:
        i += 1
        extra.append({**node, "id": 10_000_000 + i, "event_id": f"big-{i}", "session_key": f"big-{i}",
                      "text": f"Filler memory {i}: " + "lorem ipsum " * 830})
    return "\n".join(json.dumps(x) for x in rows + extra).encode() + b"\n"


def test_the_export_file_posted_as_it_is_imports(world, client_for):
    a = world["a"]
    _populate(world, client_for)
    gamma = _twin_org(world)
    file = _export(client_for(a.admin))
    c = client_for(a.admin)
    # the same rule as the JSON body: org admins only, no agent
    assert client_for(a.member).post("/api/v1/import", file, content_type="application/x-ndjson",
                                     HTTP_X_NYLON_ORG="gamma").status_code == 403
    assert client_for(a.key).post("/api/v1/import", file, content_type="application/x-ndjson").status_code == 403
    r = c.post("/api/v1/import", file, content_type="application/x-ndjson", HTTP_X_NYLON_ORG="gamma")
    assert r.status_code == 201, r.content
    assert r.json()["node"] == 1 and r.json()["asset"] == 1
    assert list(Node.objects.filter(org=gamma).values_list("text", flat=True)) == ["The Orion deal closes in June."]


def test_the_file_posted_as_json_says_which_type_it_needs(world, client_for):
    a = world["a"]
    _populate(world, client_for)
    _twin_org(world)
    r = client_for(a.admin).post("/api/v1/import", _export(client_for(a.admin)), content_type="application/json",
                                 HTTP_X_NYLON_ORG="gamma")
    assert r.status_code == 400
    assert "application/x-ndjson" in json.dumps(r.json())
    r = client_for(a.admin).post("/api/v1/import", b"\xff\xfe not text", content_type="application/x-ndjson",
                                 HTTP_X_NYLON_ORG="gamma")
    assert r.status_code == 400 and "UTF-8" in json.dumps(r.json())


def test_an_import_may_be_larger_than_other_requests(world, client_for, settings):
    a = world["a"]
    _populate(world, client_for)
    gamma = _twin_org(world)
    file = _big_file(world, client_for, 3 * 1024 * 1024)
    assert len(file) > settings.NYLON_MAX_BODY_BYTES
    c = client_for(a.admin)
    r = c.post("/api/v1/import", file, content_type="application/x-ndjson", HTTP_X_NYLON_ORG="gamma")
    assert r.status_code == 201, r.content[:500]
    assert Node.objects.filter(org=gamma).count() == r.json()["node"] > 150
    # other requests keep their limit, and an import its own
    r = c.post("/api/v1/memories/bulk", file, content_type="application/x-ndjson")
    assert r.status_code == 413
    settings.NYLON_MAX_IMPORT_BYTES = 1024 * 1024
    r = c.post("/api/v1/import", file, content_type="application/x-ndjson", HTTP_X_NYLON_ORG="gamma")
    assert r.status_code == 413 and str(1024 * 1024) in r.json()["error"]["message"]
