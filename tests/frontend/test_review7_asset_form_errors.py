"""A service's refusal of an asset create or edit comes back on the open form: status 400, what was
typed kept, each error next to its field under the form's label (not the API's field name), and
nothing written. Before, the console redirected with a flash "team_id: …" and the input was lost."""

from __future__ import annotations

import re

import pytest

from assets import services
from assets.models import Asset, AssetVersion
from memory.models import Visibility

from .conftest import actor

pytestmark = pytest.mark.django_db


def field_block(html: str, form_id: str, name: str) -> str:
    """The markup of one field of a form panel: its label, input and the errors that follow it."""
    panel = html.split(f'id="{form_id}"', 1)[1].split("</details>", 1)[0]
    return panel.split(f'name="{name}"', 1)[1].split("<label>", 1)[0]


def test_create_refused_by_the_service_keeps_the_input_and_shows_the_error_on_team(world, login):
    a = world["a"]
    r = login(a.admin).post("/console/assets/", {
        "kind": "wiki", "title": "Onboarding notes", "summary": "first week", "body": "Day 1: laptop\n",
        "visibility": "team", "team": ""})
    html = r.content.decode()
    assert r.status_code == 400
    assert 'id="asset-create" open' in html
    assert 'value="Onboarding notes"' in html and "Day 1: laptop" in html and 'value="first week"' in html
    assert "Team visibility needs a team." in field_block(html, "asset-create", "team")
    assert "team_id" not in html
    assert not Asset.objects.filter(title="Onboarding notes").exists()


def test_create_chat_memory_with_an_unreadable_memory_is_an_error_on_memory_ids(world, mem, login):
    a = world["a"]
    r = login(a.member).post("/console/assets/", {
        "kind": "chat_memory", "title": "Lisbon chat", "node_ids": f"{mem.member_private} {mem.beta_org}",
        "visibility": "private", "team": ""})
    html = r.content.decode()
    assert r.status_code == 400 and 'id="asset-create" open' in html
    assert f"No such memory: {mem.beta_org}." in field_block(html, "asset-create", "node_ids")
    assert 'value="Lisbon chat"' in html and "node_ids:" not in html
    assert not Asset.objects.filter(title="Lisbon chat").exists()


def test_edit_refused_by_the_service_keeps_the_input_and_shows_the_error_on_memory_ids(world, mem, login):
    a = world["a"]
    chat = services.asset_create(actor=actor(a.member, a.org), kind="chat_memory", title="Lisbon chat",
                                 body="old body", node_ids=[mem.member_private], visibility=Visibility.PRIVATE)
    r = login(a.member).post(f"/console/assets/{chat.id}/", {
        "op": "edit", "expected_version": 1, "title": "Lisbon chat v2", "summary": "",
        "body": "I typed a lot here", "node_ids": f"{mem.member_private} {mem.beta_org}"})
    html = r.content.decode()
    assert r.status_code == 400
    assert 'id="asset-edit" open' in html
    assert 'value="Lisbon chat v2"' in html and "I typed a lot here" in html
    block = field_block(html, "asset-edit", "node_ids")
    assert f"No such memory: {mem.beta_org}." in block
    assert re.search(rf'value="{mem.member_private} {mem.beta_org}"', html)
    assert "node_ids:" not in html
    chat.refresh_from_db()
    assert (chat.title, chat.body, chat.version) == ("Lisbon chat", "old body", 1)
    assert AssetVersion.objects.filter(asset=chat).count() == 1


def test_edit_of_an_asset_deprecated_meanwhile_shows_the_error_on_its_page(world, login):
    a = world["a"]
    asset = services.asset_create(actor=actor(a.member, a.org), kind="wiki", title="Old page", body="x")
    # Another tab moved it out of the editable states after this one loaded the form.
    Asset.objects.filter(id=asset.id).update(status="deprecated")
    r = login(a.member).post(f"/console/assets/{asset.id}/", {"op": "edit", "expected_version": 1,
                                                              "title": "New title", "body": "typed"})
    html = r.content.decode()
    assert r.status_code == 400
    assert re.search(r'id="asset-error">A deprecated asset cannot be edited\.<', html)
    assert "status:" not in html
    assert Asset.objects.get(id=asset.id).title == "Old page"


def test_promotion_refused_by_the_service_is_an_error_on_the_visibility_form(world, login):
    a = world["a"]
    asset = services.asset_create(actor=actor(a.member, a.org), kind="wiki", title="Mine", body="x")
    r = login(a.member).post(f"/console/assets/{asset.id}/", {"op": "visibility", "visibility": "team",
                                                              "team": "", "expected_version": 1})
    html = r.content.decode()
    assert r.status_code == 400
    form = html.split('id="visibility-form"', 1)[1].split("</form>", 1)[0]
    assert "Team visibility needs a team." in form.split('name="team"', 1)[1]
    assert "team_id" not in html
    asset.refresh_from_db()
    assert (asset.status, asset.visibility) == ("draft", "private")
