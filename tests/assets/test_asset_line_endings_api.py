"""Assets written over the API keep one kind of line break: "\r\n" from a Windows client reached
agents as written, and re-sending the same text with other line breaks made a new version."""

from __future__ import annotations

import pytest

from .helpers import create_asset

pytestmark = pytest.mark.django_db


def test_api_writes_store_newlines_and_an_unchanged_text_is_no_new_version(world, client_for):
    c = client_for(world["a"].owner)
    body = create_asset(c, title="Runbook", summary="One\r\ntwo", body="1. Merge to main.\r\n2. Deploy.\r3. Check.")
    assert body["body"] == "1. Merge to main.\n2. Deploy.\n3. Check." and body["summary"] == "One\ntwo"
    r = c.patch(f"/api/v1/assets/{body['id']}", {"expected_version": 1, "body": "1. Merge to main.\n2. Deploy.\r\n3. Check."},
                format="json")
    assert r.status_code == 200 and r.json()["version"] == 1  # the same text
    r = c.patch(f"/api/v1/assets/{body['id']}", {"expected_version": 1, "body": "1. Merge.\r\n2. Deploy."}, format="json")
    assert r.json()["version"] == 2 and r.json()["body"] == "1. Merge.\n2. Deploy."
