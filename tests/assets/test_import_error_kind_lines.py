"""An org admin importing the org's own export was refused with ``line 16: owner_user: restricted
memory of a member…`` where line 16 was an asset: the refusal now names the row's kind (memory or
asset), and lines are counted as the file has them (a raw U+2028 inside a memory's text, which
the export keeps, split the row and shifted every later line number)."""

from __future__ import annotations

import json

import pytest

from assets.models import Asset

from .helpers import create_asset, grant, weave

pytestmark = pytest.mark.django_db


def _export(client) -> str:
    r = client.get("/api/v1/export")
    assert r.status_code == 200
    return b"".join(r.streaming_content).decode()


def test_own_export_refusal_names_the_asset_on_its_line(world, client_for):
    a = world["a"]
    admin, member = client_for(a.admin), client_for(a.member)
    weave(admin, "Release notes:\u2028the API freeze starts Monday.\u0085Then QA.", visibility="org")
    secret = create_asset(member, title="Member's restricted runbook", visibility="restricted")
    grant(member, "asset", secret["id"], grantee_kind="user", user_id=a.admin.id)
    text = _export(admin)
    assert "\u2028" in text  # kept raw inside the JSON string
    lines = text.split("\n")
    asset_line = next(i for i, raw in enumerate(lines, start=1)
                      if raw and json.loads(raw)["type"] == "asset" and json.loads(raw)["id"] == secret["id"])

    r = admin.post("/api/v1/import", {"jsonl": text}, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["error"]["fields"]["jsonl"] == [
        f"line {asset_line}: owner_user: restricted asset of a member is imported through the API only by that "
        f"member ({a.admin.username} is not {a.member.username}); a full restore is `manage.py import_memory`."]


def test_own_export_with_a_line_separator_in_a_memory_imports(world, client_for):
    a = world["a"]
    admin = client_for(a.admin)
    weave(admin, "Release notes:\u2028the API freeze starts Monday.", visibility="org")
    create_asset(admin, title="Runbook", visibility="org", body="step one\u2029step two")
    r = admin.post("/api/v1/import", {"jsonl": _export(admin)}, format="json")
    assert r.status_code == 200, r.content  # nothing created
    assert r.json()["skipped"] >= 2 and r.json()["node"] == 0 and r.json()["asset"] == 0  # all already there
    assert Asset.objects.filter(org=a.org).count() == 1


def test_private_node_of_a_member_is_still_called_memory(world, client_for):
    a = world["a"]
    admin = client_for(a.admin)
    weave(admin, "An org note.", visibility="org")
    rows = [json.loads(x) for x in _export(admin).split("\n") if x]
    node = next(r for r in rows if r["type"] == "node")
    forged = {**node, "id": 999_001, "owner_user": a.member.username, "visibility": "private", "event_id": "x-1"}
    r = admin.post("/api/v1/import", {"jsonl": "\n".join(json.dumps(x) for x in (rows[0], forged))}, format="json")
    assert r.status_code == 400
    assert r.json()["error"]["fields"]["jsonl"][0].startswith("line 2: owner_user: private memory of a member")
