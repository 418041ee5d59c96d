"""Contradictions are checked for memories written without a vector too (``NYLON_EMBEDDER=none``, or
the embedder down): the check took only nodes with an embedding, so with no embedder no conflict
was ever found and nothing said so (first-user audit). Their candidates are the recent nodes sharing
most of their words, the owner's and the shared audience's."""

from __future__ import annotations

import pytest

from memory.embedding import NullEmbedder, get_embedder, set_embedder
from memory.models import Node
from reflection import conflicts
from reflection.models import Conflict

from .helpers import weave

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_embedder():
    before = get_embedder()
    set_embedder(NullEmbedder())
    yield
    set_embedder(before)


def _write(client, key: str, text: str, when: str, **extra) -> int:
    return weave(client, key, end=False, turns=[{"speaker": "Ops", "text": text, "occurred_at": when}],
                 **extra)["node_ids"][0]


def test_a_contradiction_between_memories_without_vectors_is_found(world, client_for, no_llm, no_embedder):
    c = client_for(world["a"].key)
    first = _write(c, "s1", "The backup job runs at 01:00 UTC.", "2026-11-20T09:00:00Z")
    for i in range(6):  # other lines of the owner, some sharing a word
        _write(c, f"n{i}", f"Standup {i}: the deploy job finished and the dashboards are green.", "2026-11-21T09:00:00Z")
    second = _write(c, "s2", "The backup job runs at 04:00 UTC.", "2026-11-24T09:00:00Z")
    assert Node.objects.filter(id__in=[first, second], embedding__isnull=True).count() == 2  # the premise

    assert conflicts.detect(org_id=world["a"].org.id, node_ids=[second]) == 1
    found = Conflict.objects.get()
    assert (found.node_a_id, found.node_b_id) == (first, second) and found.detector == "rule"


def test_without_vectors_another_owners_private_memory_is_no_candidate(world, client_for, no_llm, no_embedder):
    a = world["a"]
    mine = _write(client_for(a.key), "s1", "The backup job runs at 01:00 UTC.", "2026-11-20T09:00:00Z")
    theirs = _write(client_for(a.owner), "s2", "The backup job runs at 04:00 UTC.", "2026-11-24T09:00:00Z")
    assert conflicts.detect(org_id=a.org.id, node_ids=[theirs, mine]) == 0  # each private to its owner

    shared = _write(client_for(a.owner), "s3", "The backup job runs at 05:00 UTC.", "2026-11-25T09:00:00Z",
                    visibility="org")
    other = _write(client_for(a.key), "s4", "The backup job runs at 02:00 UTC.", "2026-11-26T09:00:00Z",
                   visibility="org")
    assert conflicts.detect(org_id=a.org.id, node_ids=[other]) >= 1
    pairs = set(Conflict.objects.values_list("node_a_id", "node_b_id"))
    assert (shared, other) in pairs and not {p for p in pairs if mine in p and theirs in p}


def test_words_of_any_script_find_candidates(world, client_for, no_llm, no_embedder):
    c = client_for(world["a"].key)
    first = _write(c, "s1", "Резервное копирование запускается в час ночи.", "2026-11-20T09:00:00Z")
    second = _write(c, "s2", "Резервное копирование запускается в четыре утра.", "2026-11-24T09:00:00Z")
    found = conflicts._word_candidates_of([Node.objects.get(pk=second)])
    assert [o.id for o, _ in found[second]] == [first]
