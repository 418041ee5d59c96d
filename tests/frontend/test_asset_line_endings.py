"""Asset text typed in the console is stored with ``\\n`` line breaks. A browser submits a textarea's
breaks as ``\\r\\n`` (the HTML form encoding), and a pasted text may hold lone ``\\r``: stored as
sent, they reached the agents served the asset ("1. Merge to main.\\r\\n2. …" in the context)."""

from __future__ import annotations

import pytest

from assets import services
from assets.models import Asset, AssetVersion
from memory.models import Visibility

from .conftest import actor

pytestmark = pytest.mark.django_db


def test_create_stores_plain_newlines(world, login):
    a = world["a"]
    r = login(a.member).post("/console/assets/", {
        "kind": "wiki", "title": "Deploy\r\nrunbook", "summary": "how we\rship",
        "body": "1. Merge to main.\r\n2. Tag the release.\r3. Deploy.\r\n", "visibility": "private", "team": ""})
    assert r.status_code == 302
    asset = Asset.objects.get(org=a.org, title="Deploy\nrunbook")
    assert asset.summary == "how we\nship"
    assert asset.body == "1. Merge to main.\n2. Tag the release.\n3. Deploy.\n"
    assert AssetVersion.objects.get(asset=asset, version=1).body == asset.body


def test_edit_stores_plain_newlines_and_an_unchanged_text_is_no_new_version(world, login):
    a = world["a"]
    asset = services.asset_create(actor=actor(a.member, a.org), kind="wiki", title="Deploy runbook",
                                  body="1. Merge to main.\n2. Tag.", visibility=Visibility.PRIVATE)
    c = login(a.member)
    # the browser sends the unchanged textarea back with \r\n: the same text, so no new version
    r = c.post(f"/console/assets/{asset.id}/", {"op": "edit", "expected_version": 1, "title": "Deploy runbook",
                                                "summary": "", "body": "1. Merge to main.\r\n2. Tag."})
    assert r.status_code == 302
    asset.refresh_from_db()
    assert asset.version == 1 and asset.body == "1. Merge to main.\n2. Tag."
    r = c.post(f"/console/assets/{asset.id}/", {"op": "edit", "expected_version": 1, "title": "Deploy runbook",
                                                "summary": "", "body": "1. Merge to main.\r\n2. Tag.\r\n3. Deploy."})
    assert r.status_code == 302
    asset.refresh_from_db()
    assert asset.version == 2 and asset.body == "1. Merge to main.\n2. Tag.\n3. Deploy."
    assert "\r" not in AssetVersion.objects.get(asset=asset, version=2).body


def test_a_break_counts_once_against_the_length_limit(world, login):
    a = world["a"]
    body = "x\r\n" * 50_000  # 150,000 characters as sent, 100,000 as stored
    r = login(a.member).post("/console/assets/", {"kind": "wiki", "title": "Long", "body": body,
                                                  "visibility": "private", "team": ""})
    assert r.status_code == 302
    assert Asset.objects.get(org=a.org, title="Long").body == "x\n" * 50_000
