"""Creating an asset with node_ids is refused unless it is a chat memory, as an update is: the
create path dropped them and answered 201 with node_ids []."""

from __future__ import annotations

import pytest

from assets.models import Asset

from .helpers import create_asset, weave

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("kind", ["skill", "wiki", "persona", "scenario"])
def test_create_with_node_ids_is_a_400_unless_chat_memory(world, client_for, kind):
    c = client_for(world["a"].member)
    node = weave(c, "Rotate the keys every quarter.")
    before = Asset.objects.count()
    for ids in ([node], [node, 999_999_999]):  # readable ids and ids that do not exist alike
        r = c.post("/api/v1/assets", {"kind": kind, "title": "How to rotate", "node_ids": ids}, format="json")
        assert r.status_code == 400, r.content
        assert r.json()["error"]["fields"]["node_ids"] == ["Only chat-memory assets hold memories."]
    assert Asset.objects.count() == before
    # the update refuses the same field with the same words
    a = create_asset(c, kind=kind, title="How to rotate")
    assert a["node_ids"] == []
    r = c.patch(f"/api/v1/assets/{a['id']}", {"expected_version": 1, "node_ids": [node]}, format="json")
    assert r.status_code == 400
    assert r.json()["error"]["fields"]["node_ids"] == ["Only chat-memory assets hold memories."]


def test_create_without_or_with_empty_node_ids_still_works_and_chat_memory_keeps_them(world, client_for):
    c = client_for(world["a"].member)
    node = weave(c, "Rotate the keys every quarter.")
    assert create_asset(c, kind="skill", title="a", node_ids=[])["node_ids"] == []
    assert create_asset(c, kind="skill", title="b")["node_ids"] == []
    assert create_asset(c, kind="chat_memory", title="c", node_ids=[node])["node_ids"] == [node]
