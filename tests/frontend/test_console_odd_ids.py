"""Ids posted or typed as text: characters that ``str.isdigit`` takes for digits but ``int``
cannot parse ("²", "③") are refused like any other non-number, never a 500."""

from __future__ import annotations

import pytest

from assets import services
from assets.models import Asset
from reflection.models import Conflict

from .conftest import actor

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_(world, login):
    c = login(world["a"].owner)
    c.raise_request_exception = False  # a 500 is asserted on, not raised
    return c


def test_asset_create_with_a_superscript_memory_id_is_a_form_error(client_):
    before = Asset.objects.count()
    r = client_.post("/console/assets/", {"kind": "chat_memory", "title": "t", "node_ids": "12 ²",
                                          "visibility": "private"})
    assert r.status_code == 400
    assert "Memory ids are positive whole numbers." in r.content.decode()
    assert Asset.objects.count() == before


def test_feed_rows_skip_a_superscript_id(client_, mem):
    r = client_.get(f"/console/feed/nodes?ids=²,{mem.owner_org}")
    assert r.status_code == 200
    assert "Everyone: the Lisbon offsite is on March 14." in r.content.decode()


def test_conflict_keep_with_a_superscript_id_is_not_a_500(world, client_, mem):
    conflict = Conflict.objects.create(org=world["a"].org, node_a_id=mem.owner_org, node_b_id=mem.agent_org,
                                       reason="different date", detector="rule")
    r = client_.post(f"/console/conflicts/{conflict.id}/resolve", {"action": "keep_both", "keep": "²"})
    assert r.status_code == 302


def test_unbind_with_a_superscript_binding_id_is_404(world, client_):
    a = world["a"]
    asset = services.asset_create(actor=actor(a.owner, a.org), kind="wiki", title="x", visibility="private")
    r = client_.post(f"/console/assets/{asset.id}/", {"op": "unbind", "binding_id": "²"})
    assert r.status_code == 404
