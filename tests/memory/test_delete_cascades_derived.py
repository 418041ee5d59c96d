"""Deleting a memory deletes what was drawn only from it. A turn "We decided the staging database
password is hunter2." was deleted (204), and the heuristic fact abstracted from it, "ana and others
decided the staging database password is hunter2.", stayed the top hit of resonate, readable by id
and listed, its lineage now empty: the delete soft-deleted the one row. Now a derivation (a fact, a
bridge drawn from facts, and on down) with no live source left goes in the same transaction,
audited as the delete is; one with another live source stays. The delete's own access rule decides:
a reader who may not change the turn deletes nothing, nor does another org's key."""

from __future__ import annotations

import pytest
from django.test import Client

from assets.models import AuditEvent
from memory.cache import get_cache
from memory.models import Edge, EdgeKind, Node, NodeKind, SourceKind
from reflection import services as reflection
from tests.reflection.helpers import session

pytestmark = pytest.mark.django_db

SECRET = {"speaker": "ana", "text": "We decided the staging database password is hunter2.",
          "occurred_at": "2026-11-20T09:00:00Z"}
OTHER = {"speaker": "ben", "text": "We deployed the staging database on Postgres 17.",
         "occurred_at": "2026-11-20T09:01:00Z"}
QUERY = "staging database password"


@pytest.fixture(autouse=True)
def fresh_cache():
    get_cache().drop()
    yield
    get_cache().drop()


def _weave_and_abstract(client, org, key: str, turns: list[dict]) -> tuple[list[int], list[Node]]:
    """The turns (org-visible, so every member reads them), their session ended and abstracted
    (heuristic facts: no LLM in tests)."""
    r = client.post("/api/v1/memories/weave-session",
                    {"session_key": key, "turns": turns, "end_session": True, "visibility": "org"}, format="json")
    assert r.status_code == 201, r.content
    reflection.abstract_session(session_id=session(org, key).id)
    return r.json()["node_ids"], list(Node.objects.filter(org=org, kind=NodeKind.FACT, session_key=key).order_by("id"))


def _hits(client, query: str = QUERY) -> list[int]:
    r = client.post("/api/v1/memories/resonate", {"query": query, "k": 20, "reinforce": False}, format="json")
    assert r.status_code == 200, r.content
    return [h["node_id"] for h in r.json()["hits"]]


def _listed(client, **params) -> set[int]:
    r = client.get("/api/v1/memories/nodes", {"limit": 500, **params})
    assert r.status_code == 200, r.content
    return {n["id"] for n in r.json()["results"]}


def _console_ids(user, query: str = "") -> set[int]:
    import re

    c = Client()
    c.force_login(user)
    r = c.get(f"/console/memories/{query}")
    assert r.status_code == 200
    return {int(x) for x in re.findall(r'data-node-id="(\d+)"', r.content.decode())}


def test_the_owners_delete_takes_the_fact_drawn_only_from_it(world, client_for):
    a = world["a"]
    c = client_for(a.key)
    (leaf,), facts = _weave_and_abstract(c, a.org, "staging", [SECRET])
    assert len(facts) == 1 and facts[0].source_node_ids == [leaf]  # premise: the heuristic fact
    fact = facts[0].id
    assert "hunter2" in facts[0].text and fact in _hits(c)  # and it is found (the cache is warm now)
    assert fact in _listed(c, kind="fact") and fact in _console_ids(a.owner)

    r = c.delete(f"/api/v1/memories/nodes/{leaf}")
    assert r.status_code == 204 and not r.content

    assert not {leaf, fact} & set(_hits(c))  # the warm cache caught up
    assert not {leaf, fact} & set(_hits(c, "hunter2"))
    assert c.get(f"/api/v1/memories/nodes/{fact}").status_code == 404
    assert fact not in _listed(c) and fact not in _listed(c, kind="fact")
    assert not {leaf, fact} & _console_ids(a.owner)
    get_cache().drop()  # a cold build agrees
    assert not {leaf, fact} & set(_hits(c))
    gone = Node.objects.get(id=fact)
    assert gone.deleted_at is not None and gone.deleted_at == Node.objects.get(id=leaf).deleted_at
    # audited as the delete is: the delete names it, and it has an entry of its own
    entries = {e.object_id: e for e in AuditEvent.objects.filter(org=a.org, action="memory.delete")}
    assert entries[str(leaf)].detail == {"derived_deleted": [fact]}
    assert entries[str(fact)].reason == "sources_deleted" and entries[str(fact)].detail == {"deleted_with": leaf}
    assert entries[str(fact)].actor_label == entries[str(leaf)].actor_label


def test_an_org_admin_deleting_an_org_memory_takes_its_fact_too(world, client_for):
    a = world["a"]
    (leaf,), (fact,) = _weave_and_abstract(client_for(a.key), a.org, "staging", [SECRET])
    admin = client_for(a.admin)
    assert admin.delete(f"/api/v1/memories/nodes/{leaf}").status_code == 204
    assert Node.objects.get(id=fact.id).deleted_at is not None
    assert fact.id not in _hits(admin) and admin.get(f"/api/v1/memories/nodes/{fact.id}").status_code == 404


def test_a_fact_with_another_live_source_stays(world, client_for):
    """A fact drawn from two turns (as an LLM draws them) restates the other one too, which is still
    a memory: it stays when one source is deleted, and goes with the second."""
    a = world["a"]
    c = client_for(a.key)
    (secret, other), facts = _weave_and_abstract(c, a.org, "staging", [SECRET, OTHER])
    both = Node.objects.create(
        org=a.org, owner_agent=a.agent, visibility="org", kind=NodeKind.FACT, source_kind=SourceKind.LLM,
        text="The staging database runs Postgres 17; its password was decided.", session_key="staging",
        occurred_at=facts[0].occurred_at, tension_updated_at=facts[0].occurred_at, source_node_ids=[secret, other])
    only_secret = next(f.id for f in facts if f.source_node_ids == [secret])
    only_other = next(f.id for f in facts if f.source_node_ids == [other])

    assert c.delete(f"/api/v1/memories/nodes/{secret}").status_code == 204
    live = set(Node.objects.filter(org=a.org, deleted_at__isnull=True).values_list("id", flat=True))
    assert only_secret not in live
    assert {both.id, only_other, other} <= live
    assert c.get(f"/api/v1/memories/nodes/{both.id}").status_code == 200
    assert both.id in _hits(c, "staging database Postgres")

    assert c.delete(f"/api/v1/memories/nodes/{other}").status_code == 204
    assert not Node.objects.filter(id__in=[both.id, only_other], deleted_at__isnull=True).exists()


def test_derivations_of_derivations_go_and_a_superseded_one_too(world, client_for):
    """A bridge drawn from the fact alone goes with it (and on down); a fact superseded by a
    conflict's resolution is still served by id and list, so it goes as well."""
    a = world["a"]
    c = client_for(a.key)
    (leaf,), (fact,) = _weave_and_abstract(c, a.org, "staging", [SECRET])
    at = fact.occurred_at
    bridge = Node.objects.create(org=a.org, owner_agent=a.agent, visibility="org", kind=NodeKind.BRIDGE,
                                 source_kind=SourceKind.REFLECTION, text="Staging credentials live in the team vault.",
                                 occurred_at=at, tension_updated_at=at, source_node_ids=[fact.id])
    Edge.objects.create(org=a.org, src_id=fact.id, dst_id=bridge.id, kind=EdgeKind.BRIDGE, weight=0.8)
    Node.objects.filter(id=fact.id).update(valid_to=at)  # superseded

    assert c.delete(f"/api/v1/memories/nodes/{leaf}").status_code == 204
    assert not Node.objects.filter(id__in=[fact.id, bridge.id], deleted_at__isnull=True).exists()
    assert AuditEvent.objects.get(org=a.org, action="memory.delete", object_id=str(leaf)).detail == {
        "derived_deleted": [fact.id, bridge.id]}


def test_a_reader_who_may_not_change_it_deletes_nothing_and_the_owner_everything(world, client_for):
    a = world["a"]
    c = client_for(a.key)
    (leaf,), (fact,) = _weave_and_abstract(c, a.org, "staging", [SECRET])
    member = client_for(a.member)  # reads the org memory, may not change it
    assert member.get(f"/api/v1/memories/nodes/{leaf}").status_code == 200
    assert member.delete(f"/api/v1/memories/nodes/{leaf}").status_code == 403
    assert member.delete(f"/api/v1/memories/nodes/{fact.id}").status_code == 403
    outsider = client_for(world["b"].key)  # another org's agent
    assert outsider.delete(f"/api/v1/memories/nodes/{leaf}").status_code == 404
    assert client_for(world["outsider"]).delete(f"/api/v1/memories/nodes/{leaf}").status_code in (403, 404)
    assert Node.objects.filter(id__in=[leaf, fact.id], deleted_at__isnull=True).count() == 2
    assert not AuditEvent.objects.filter(action="memory.delete").exists()
    assert fact.id in _hits(c)
    # the one who may: the turn and its fact
    assert c.delete(f"/api/v1/memories/nodes/{leaf}").status_code == 204
    assert not Node.objects.filter(id__in=[leaf, fact.id], deleted_at__isnull=True).exists()


def test_the_console_delete_says_what_went_with_it(world, client_for):
    a = world["a"]
    (leaf,), (fact,) = _weave_and_abstract(client_for(a.owner), a.org, "staging", [SECRET])
    c = Client()
    c.force_login(a.owner)
    r = c.post(f"/console/memories/{leaf}/delete", follow=True)
    assert r.status_code == 200
    assert f"Memory #{leaf} deleted, with 1 memory drawn only from it." in r.content.decode()
    assert Node.objects.get(id=fact.id).deleted_at is not None


def test_a_turn_deleted_while_its_facts_were_drafted_gets_none(world, client_for, monkeypatch):
    """Abstraction drafts facts outside any lock; a delete committed meanwhile ran its cascade
    before the fact existed. The write re-reads its sources under a lock and drops such a draft."""
    a = world["a"]
    c = client_for(a.key)
    r = c.post("/api/v1/memories/weave-session",
               {"session_key": "staging", "turns": [SECRET, {**OTHER, "text": "I deployed the new build."}],
                "end_session": True, "visibility": "org"}, format="json")
    secret, other = r.json()["node_ids"]
    real = reflection._finish

    def delete_first(sess, leaves, *args, **kwargs):
        Node.objects.filter(id=secret).update(deleted_at=leaves[0].occurred_at)  # after the leaves were read
        return real(sess, leaves, *args, **kwargs)

    monkeypatch.setattr(reflection, "_finish", delete_first)
    reflection.abstract_session(session_id=session(a.org, "staging").id)
    facts = list(Node.objects.filter(org=a.org, kind=NodeKind.FACT).values_list("source_node_ids", flat=True))
    assert facts == [[other]]
