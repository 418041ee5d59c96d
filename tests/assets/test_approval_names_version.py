"""``POST assets/{id}/transition {"to": "approved"}`` took ``expected_version`` as optional. A candidate
stays editable by its owner while it waits, so an approver who reviewed version 2 and approved
without naming it approved, and served to every bound agent, whatever the owner saved in between.
Approving now names the version reviewed: without it a 400 on ``expected_version``, with an older
one a 409; nothing is approved either way."""

from __future__ import annotations

import pytest
from django.test import Client

from assets.models import Asset, AuditEvent

from .helpers import approve
from .test_approved_edit_review import (  # noqa: F401
    APPROVED_TEXT,
    INJECTION,
    _approved_team_skill,
    _edit,
    _stable,
    fresh_cache,
)

pytestmark = pytest.mark.django_db


def _approve(client, aid, **body):
    return client.post(f"/api/v1/assets/{aid}/transition", {"to": "approved", **body}, format="json")


def test_approving_without_the_version_reviewed_is_refused(world, client_for):
    a = world["a"]
    aid, carol, bob = _approved_team_skill(world, client_for)
    harmless = APPROVED_TEXT + " Also tag the release."
    assert _edit(carol, aid, 1, harmless)["status"] == "candidate"
    reviewed = bob.get(f"/api/v1/assets/{aid}").json()
    assert reviewed["version"] == 2 and reviewed["body"] == harmless
    _edit(carol, aid, 2, INJECTION)  # swapped while it waits
    moves = AuditEvent.objects.filter(org=a.org, action="asset.transition").count()

    for body in ({}, {"expected_version": None}):
        r = _approve(bob, aid, **body)
        assert r.status_code == 400, r.content
        assert r.json()["error"]["fields"]["expected_version"] == [
            "Required to approve: the version you reviewed (a newer one is a 409)."]
    r = _approve(bob, aid, expected_version=2)  # what bob reviewed is no longer current
    assert r.status_code == 409, r.content
    asset = Asset.objects.get(id=aid)
    assert asset.status == "candidate" and asset.approved_version == 1
    assert AuditEvent.objects.filter(org=a.org, action="asset.transition").count() == moves
    assert INJECTION not in _stable(client_for, world)

    # having read version 3, bob may approve it
    assert approve(bob, aid, version=3)["served_version"] == 3
    assert INJECTION in _stable(client_for, world)


def test_other_moves_still_need_no_version(world, client_for):
    aid, carol, bob = _approved_team_skill(world, client_for)
    _edit(carol, aid, 1, INJECTION)
    r = bob.post(f"/api/v1/assets/{aid}/transition", {"to": "draft", "note": "no"}, format="json")
    assert r.status_code == 200 and r.json()["status"] == "draft", r.content


def test_the_consoles_approve_button_names_the_version_shown(world, client_for):
    aid, carol, bob = _approved_team_skill(world, client_for)
    _edit(carol, aid, 1, INJECTION)
    console = Client()
    console.force_login(Asset.objects.get(id=aid).approved_by)
    html = console.get(f"/console/assets/{aid}/").content.decode()
    form = html[:html.index('id="transition-approved"')].rsplit("<form", 1)[1]
    assert 'name="to" value="approved"' in form and 'name="expected_version" value="2"' in form
