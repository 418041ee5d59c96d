"""Post-commit follow-ups (``memory.Followup``): the conflict check a write owes is recorded in the
write's own transaction, cleared when done, and re-sent by the sweep only when overdue. The real
broker outage, with the real worker, is in tests/reflection/test_worker_followups.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from memory import services
from memory.models import Followup, MemorySession, Node
from reflection import conflicts, hooks
from reflection import services as reflection_services
from reflection.models import Conflict

pytestmark = pytest.mark.django_db

SAY = [{"speaker": "Ana", "text": "I eat spicy food.", "occurred_at": "2023-05-08T10:00:00Z"}]
DENY = [{"speaker": "Ana", "text": "I don't eat spicy food.", "occurred_at": "2023-06-08T10:00:00Z"}]


@pytest.fixture
def no_llm(settings):
    settings.NYLON_LLM_URL = ""


@pytest.fixture
def sent(monkeypatch):
    """What would go to the broker: (task name, args); ``sent.broker_up = False`` makes sends fail."""

    class Sent(list):
        broker_up = True

    out = Sent()

    def fake_send(task, *args):
        if out.broker_up:
            out.append((task.name, args))
        return out.broker_up

    monkeypatch.setattr(hooks, "_send", fake_send)
    return out


def weave(client, key: str, turns, end: bool = False, status: int = 201) -> dict:
    r = client.post("/api/v1/memories/weave-session", {"session_key": key, "turns": turns, "end_session": end},
                    format="json")
    assert r.status_code == status, r.content
    return r.json()


def age(*ids: int, secs: float = 3600, column: str = "created_at") -> None:
    Followup.objects.filter(id__in=ids).update(**{column: timezone.now() - timedelta(seconds=secs)})


def test_a_weave_records_its_conflict_check_with_the_write_and_the_check_clears_it(
        world, client_for, sent, no_llm, django_capture_on_commit_callbacks):
    org = world["a"].org
    c = client_for(world["a"].key)
    with django_capture_on_commit_callbacks(execute=True):
        first = weave(c, "s1", [{**SAY[0], "event_id": "e1"}])["node_ids"][0]
    f1 = Followup.objects.get()
    assert (f1.org_id, f1.kind, f1.node_ids, f1.attempts, f1.sent_at) == (org.id, "conflicts", [first], 0, None)
    assert sent == [("reflection.detect_conflicts", (org.id, [first], f1.id))]
    with django_capture_on_commit_callbacks(execute=True):  # a retried write adds nothing: nothing owed
        weave(c, "s1", [{**SAY[0], "event_id": "e1"}], status=200)  # a replay: nothing created
    assert Followup.objects.count() == 1 and len(sent) == 1
    assert conflicts.detect_followup(followup_id=f1.id) == 0  # nothing to contradict yet
    assert not Followup.objects.exists()

    second = weave(c, "s2", DENY)["node_ids"][0]
    f2 = Followup.objects.get()
    duplicate = services.followup_create(org_id=org.id, node_ids=[second])  # a second delivery of the check
    assert conflicts.detect_followup(followup_id=f2.id) == 1
    assert conflicts.detect_followup(followup_id=f2.id) == 0  # redelivered: the row is gone, nothing runs
    assert conflicts.detect_followup(followup_id=duplicate.id) == 0  # run again: the pair is already stored
    assert Conflict.objects.filter(node_a_id=first, node_b_id=second).count() == 1
    assert not Followup.objects.exists()


def test_a_rolled_back_write_owes_nothing_and_sends_nothing(world, sent, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with pytest.raises(RuntimeError), transaction.atomic():
            services.followup_create(org_id=world["a"].org.id, node_ids=[1, 2])
            raise RuntimeError("the write failed after recording its follow-up")
    assert callbacks == [] and sent == [] and not Followup.objects.exists()


def test_bulk_enrichment_and_abstraction_record_their_conflict_checks(world, client_for, sent, no_llm):
    org = world["a"].org
    c = client_for(world["a"].key)
    body = c.post("/api/v1/memories/bulk", [{"session_key": "b1", "turns": SAY + DENY}], format="json").json()
    assert not Followup.objects.exists()  # deferred with the batch
    services.enrich_batch(batch_id=body["batch_id"])
    assert Followup.objects.get().node_ids == body["node_ids"]
    Followup.objects.all().delete()

    weave(c, "s1", [{"speaker": "Ana", "text": "I decided to sign up for the spring course.",
                     "occurred_at": "2023-05-08T10:02:00Z"}], end=True)
    Followup.objects.all().delete()
    session_id = MemorySession.objects.get(key="s1").id
    assert reflection_services.abstract_session(session_id=session_id)["facts"] == 1
    fact_ids = list(Node.objects.filter(org=org, kind="fact").values_list("id", flat=True))
    assert Followup.objects.get().node_ids == fact_ids


def test_the_sweep_resends_only_overdue_unfinished_work(world, sent, caplog):
    org_id = world["a"].org.id
    fresh, overdue, done = (services.followup_create(org_id=org_id, node_ids=[i]).id for i in (1, 2, 3))
    age(overdue, done)
    conflicts.detect_followup(followup_id=done)  # done: deleted, never sent again
    assert services.enqueue_pending_followups(grace_secs=120) == 1
    assert sent == [("reflection.detect_conflicts", (org_id, [2], overdue))]
    assert "re-sent 1 post-commit follow-ups" in caplog.text
    row = Followup.objects.get(id=overdue)
    assert row.attempts == 1 and row.sent_at is not None
    assert services.enqueue_pending_followups(grace_secs=120) == 0  # just re-sent: its grace starts again
    age(overdue, column="sent_at")
    assert services.enqueue_pending_followups(grace_secs=120) == 1
    assert Followup.objects.get(id=overdue).attempts == 2

    # The broker still down: nothing is stamped, so the next run tries again, no attempt spent.
    sent.broker_up = False
    age(overdue, column="sent_at")
    assert services.enqueue_pending_followups(grace_secs=120) == 0
    assert Followup.objects.get(id=overdue).attempts == 2
    sent.broker_up = True
    assert services.enqueue_pending_followups(grace_secs=120) == 1

    # Re-sends back off: after a attempts the row waits grace * 2**a (capped at 2**6) since its last one.
    assert Followup.objects.get(id=overdue).attempts == 3
    age(overdue, column="sent_at", secs=120 * 2 ** 3 - 30)
    assert services.enqueue_pending_followups(grace_secs=120) == 0
    age(overdue, column="sent_at", secs=120 * 2 ** 3 + 30)
    assert services.enqueue_pending_followups(grace_secs=120) == 1

    # A check that keeps failing counts as failing after max_attempts, and is still re-sent (at the
    # capped back-off) so it clears by itself once the worker or the database is back.
    Followup.objects.filter(id=overdue).update(attempts=services.FOLLOWUP_MAX_ATTEMPTS)
    age(overdue, column="sent_at", secs=120 * 2 ** services.FOLLOWUP_MAX_BACKOFF - 30)
    assert services.enqueue_pending_followups(grace_secs=120) == 0
    assert services.followup_counts(org_id=org_id, grace_secs=120) == {"pending": 2, "overdue": 1, "failing": 1}
    age(overdue, column="sent_at", secs=120 * 2 ** services.FOLLOWUP_MAX_BACKOFF + 30)
    assert services.enqueue_pending_followups(grace_secs=120) == 1
    conflicts.detect_followup(followup_id=overdue)  # the work finally runs: nothing failing any more
    assert services.followup_counts(org_id=org_id, grace_secs=120) == {"pending": 1, "overdue": 0, "failing": 0}
    assert Followup.objects.filter(id=fresh, sent_at__isnull=True).exists()  # fresh: never touched


def test_the_sweep_works_in_bounded_batches_never_sent_first(world, sent):
    org_id = world["a"].org.id
    ids = [services.followup_create(org_id=org_id, node_ids=[i]).id for i in range(5)]
    age(*ids)
    Followup.objects.filter(id=ids[0]).update(sent_at=timezone.now() - timedelta(hours=2), attempts=3)
    assert services.enqueue_pending_followups(grace_secs=120, batch=2) == 2
    assert [args[2] for _, args in sent] == ids[1:3]  # the one that keeps failing does not starve them
    sent.clear()
    assert services.enqueue_pending_followups(grace_secs=120, batch=10) == 3
    assert [args[2] for _, args in sent] == [*ids[3:], ids[0]]


def test_background_status_shows_pending_followups_of_the_org(world, client_for):
    a, b = world["a"], world["b"]
    f = services.followup_create(org_id=a.org.id, node_ids=[1])
    age(f.id)
    body = client_for(a.key).get("/api/v1/background/status").json()
    assert body["followups"] == {"pending": 1, "overdue": 1, "failing": 0}
    assert client_for(b.key).get("/api/v1/background/status").json()["followups"]["pending"] == 0
