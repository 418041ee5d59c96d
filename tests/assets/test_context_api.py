"""/api/v1/context: stable prefix (persona in full, scenario index), then recall; stable_hash."""

from __future__ import annotations

import hashlib

import pytest

from assets.models import Asset
from memory.cache import get_cache

from .helpers import approve, create_asset, weave

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_cache():
    get_cache().drop()
    yield
    get_cache().drop()


def _bind(admin, agent_id, asset_id, mode, priority=100):
    r = admin.post(f"/api/v1/agents/{agent_id}/bindings", {"asset_id": asset_id, "mode": mode,
                                                            "priority": priority}, format="json")
    assert r.status_code == 201, r.content


def _setup(world, client_for):
    a = world["a"]
    admin = client_for(a.admin)
    persona = create_asset(admin, kind="persona", visibility="org", title="Tone",
                           body="Answer briefly. Prefer metric units.")
    scen = create_asset(admin, kind="scenario", visibility="org", title="Lisbon offsite",
                        summary="Planning the March offsite in Lisbon", body="Long scenario text " * 50)
    draft = create_asset(admin, kind="scenario", visibility="org", title="Unapproved")
    for x in (persona, scen):
        admin.post(f"/api/v1/assets/{x['id']}/transition", {"to": "candidate"}, format="json")
        approve(admin, x["id"])
    _bind(admin, a.agent.id, persona["id"], "full", 1)
    _bind(admin, a.agent.id, scen["id"], "index", 2)
    _bind(admin, a.agent.id, draft["id"], "index", 3)
    return persona, scen, draft


def test_order_hash_and_ten_stable_turns(world, client_for):
    a = world["a"]
    persona, scen, draft = _setup(world, client_for)
    weave(client_for(a.key), "The venue in Alfama is booked for March 14.", visibility="org")
    c = client_for(a.key)
    body = c.get("/api/v1/context").json()
    assert body["recall"] == [] and body["dynamic"] == ""
    stable = body["stable"]
    assert body["stable_hash"] == hashlib.sha256(stable.encode()).hexdigest()
    assert stable.index("Answer briefly") < stable.index("Lisbon offsite")
    assert "Long scenario text" not in stable and "Planning the March offsite" in stable  # index only
    assert "Unapproved" not in stable  # only approved assets are injected
    assert [p["asset_id"] for p in body["persona"]] == [persona["id"]]
    assert [s["asset_id"] for s in body["scenario_index"]] == [scen["id"]]
    hashes = set()
    for turn in range(10):
        r = c.post("/api/v1/context", {"query": f"When is the Alfama venue booked? turn {turn}"}, format="json")
        assert r.status_code == 200
        hashes.add(r.json()["stable_hash"])
        assert r.json()["context"].startswith(stable)  # stable part first, recall after
        assert r.json()["recall"] and "Alfama" in r.json()["recall"][0]["text"]
    assert hashes == {body["stable_hash"]}
    assert Asset.objects.get(id=persona["id"]).usage_count == 11
    # the persona changes → the hash changes
    admin = client_for(a.admin)
    r = admin.patch(f"/api/v1/assets/{persona['id']}", {"expected_version": 1, "body": "Answer at length."},
                    format="json")
    assert r.status_code == 200
    assert c.get("/api/v1/context").json()["stable_hash"] != body["stable_hash"]


def test_budgets_truncate_and_count_drops(world, client_for):
    a = world["a"]
    admin = client_for(a.admin)
    big = create_asset(admin, kind="persona", visibility="org", title="Big", body="x" * 5000)
    other = create_asset(admin, kind="skill", visibility="org", title="Other", body="y" * 100)
    for x in (big, other):
        admin.post(f"/api/v1/assets/{x['id']}/transition", {"to": "candidate"}, format="json")
        approve(admin, x["id"])
        _bind(admin, a.agent.id, x["id"], "full")
    body = client_for(a.key).get("/api/v1/context").json()
    # 4000 characters of body, the marker included (it names the 1024 removed)
    assert body["persona"][0]["truncated"] is True and "[truncated 1024 chars]" in body["stable"]
    assert len(body["persona"][0]["text"]) == 4000
    assert body["truncated"]["full"] == 1 and body["budget"]["max_chars_per_asset"] == 4000
    r = client_for(a.key).post("/api/v1/context", {"budget": {"max_stable_chars": 4100}}, format="json")
    assert r.json()["dropped"]["full"] == 1 and len(r.json()["persona"]) == 1
    assert client_for(a.key).post("/api/v1/context", {"budget": {"nope": 1}}, format="json").status_code == 400


@pytest.mark.parametrize("header,lang,needle", [
    ("", "en", "at most 3 times"), ("fr-CH, fr;q=0.9, en;q=0.8", "fr", "au plus 3 fois"),
    ("de", "de", "höchstens 3-mal"), ("zh-CN,zh;q=0.9", "zh", "最多调用 3 次"), ("ja, en;q=0.5", "en", "at most 3"),
])
def test_tool_guide_in_the_callers_language(world, client_for, header, lang, needle):
    c = client_for(world["a"].key)
    r = c.get("/api/v1/context", HTTP_ACCEPT_LANGUAGE=header) if header else c.get("/api/v1/context")
    assert r.status_code == 200 and r.json()["language"] == lang and r["Content-Language"] == lang
    assert needle in r.json()["stable"] and r.json()["memory_call_budget"] == 3


def test_users_are_refused_and_unbound_assets_absent(world, client_for):
    a = world["a"]
    assert client_for(a.member).get("/api/v1/context").status_code == 403
    create_asset(client_for(a.admin), kind="persona", visibility="org", title="Not bound", body="secret tone")
    assert "secret tone" not in client_for(a.key).get("/api/v1/context").json()["stable"]
    assert "secret tone" not in client_for(world["b"].key).get("/api/v1/context").json()["stable"]
