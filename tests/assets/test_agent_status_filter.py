"""``GET /api/v1/assets?status=…`` with an agent key filtered on the stored status before the served
rows were relabelled approved: ``?status=candidate`` told an agent which bound assets carry an edit
awaiting review, and ``?status=approved`` dropped assets it is served. An agent now filters on the
status it is shown: an asset it does not own is listed as approved; its own by their status."""

from __future__ import annotations

import pytest

from .helpers import create_asset
from .test_approved_edit_review import INJECTION, _approved_team_skill, _edit, fresh_cache  # noqa: F401

pytestmark = pytest.mark.django_db


def _ids(client, status: str) -> list[int]:
    r = client.get(f"/api/v1/assets?status={status}")
    assert r.status_code == 200, r.content
    return [x["id"] for x in r.json()["results"]]


def test_agent_filters_on_the_status_it_is_shown(world, client_for):
    a = world["a"]
    aid, carol, bob = _approved_team_skill(world, client_for)
    _edit(carol, aid, 1, INJECTION)
    bot = client_for(a.key)
    own_draft = create_asset(bot, title="Bot draft")["id"]
    own_candidate = create_asset(bot, title="Bot proposal")["id"]
    assert bot.post(f"/api/v1/assets/{own_candidate}/promote", {"visibility": "team"},
                    format="json").status_code == 200

    assert _ids(bot, "approved") == [aid]
    assert _ids(bot, "candidate") == [own_candidate]  # not the bound asset with a pending edit
    assert _ids(bot, "draft") == [own_draft]
    # sent back to draft: still served, still approved to the agent
    assert bob.post(f"/api/v1/assets/{aid}/transition", {"to": "draft"}, format="json").status_code == 200
    assert _ids(bot, "approved") == [aid] and _ids(bot, "draft") == [own_draft]
    # people filter on the status as it is
    assert aid in _ids(carol, "draft") and aid not in _ids(carol, "approved")
