"""A lifecycle move may say why (``note``): an approver sending an edit back tells its author what to
change. Before, a reason was a 400 (unknown field) and the author only saw "sent back to draft"."""

from __future__ import annotations

import pytest
from django.test import Client

from .helpers import last_event, moved
from .test_approved_edit_review import _approved_team_skill, _edit, fresh_cache  # noqa: F401

pytestmark = pytest.mark.django_db


def test_a_rejection_says_why_to_the_author(world, client_for):
    a = world["a"]
    aid, carol, bob = _approved_team_skill(world, client_for)
    _edit(carol, aid, 1, "Deploy straight to production.")
    r = bob.post(f"/api/v1/assets/{aid}/transition", {"to": "draft", "note": "Keep the canary step."}, format="json")
    assert r.status_code == 200, r.content
    got = carol.get(f"/api/v1/assets/{aid}").json()
    assert got["status"] == "draft" and got["last_move_note"]["note"] == "Keep the canary step."
    assert (got["last_move_note"]["from"], got["last_move_note"]["to"]) == ("candidate", "draft")
    assert last_event(a.org, action="asset.transition").detail["note"] == "Keep the canary step."
    console = Client()
    console.force_login(a.member)
    html = console.get(f"/console/assets/{aid}/").content.decode()
    assert 'id="last-move-note"' in html and "Keep the canary step." in html
    # the next move replaces it; a note over 500 characters is refused, nothing written
    r = bob.post(f"/api/v1/assets/{aid}/transition", moved(aid, "approved", note="x" * 501), format="json")
    assert r.status_code == 400 and "note" in r.json()["error"]["fields"]
    assert bob.post(f"/api/v1/assets/{aid}/transition", moved(aid, "approved"), format="json").status_code == 200
    assert carol.get(f"/api/v1/assets/{aid}").json()["last_move_note"] == {}
