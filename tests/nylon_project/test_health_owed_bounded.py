"""/healthz is public and unthrottled, and owed work (post-commit follow-ups, bulk batches) piles up
exactly when workers are down and monitoring polls hardest: the checks count it in bounded reads,
as the recalls check does, and still say degraded."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory import services
from memory.models import Followup, IngestBatch

pytestmark = pytest.mark.django_db

PILE = services.OWED_COUNT_CAP + 500
FAILING = 3


@pytest.fixture(autouse=True)
def _fresh_worker_ping():
    from nylon_project import health

    health._WorkerPing.reset()
    yield
    health._WorkerPing.reset()


def _pile_up(org_id: int) -> None:
    """PILE follow-ups and unfinished batches, two hours old and never run; the first FAILING of
    each were run BATCH/FOLLOWUP_MAX_ATTEMPTS times already."""
    with connection.cursor() as cur:
        cur.execute("INSERT INTO memory_followup (org_id, kind, node_ids, created_at, attempts) "
                    "SELECT %s, 'conflicts', '{}', now() - interval '2 hours' + g * interval '1 millisecond', "
                    "CASE WHEN g <= %s THEN %s ELSE 0 END FROM generate_series(1, %s) g",
                    [org_id, FAILING, services.FOLLOWUP_MAX_ATTEMPTS, PILE])
        cur.execute("INSERT INTO memory_ingestbatch (org_id, node_ids, embed_pending, status, attempts, error, "
                    "request_id, created_at) SELECT %s, '{}', false, 'pending', "
                    "CASE WHEN g <= %s THEN %s ELSE 0 END, '', '', "
                    "now() - interval '2 hours' + g * interval '1 millisecond' FROM generate_series(1, %s) g",
                    [org_id, FAILING, services.BATCH_MAX_ATTEMPTS, PILE])


def test_healthz_counts_a_pile_of_owed_work_in_bounded_reads_and_says_degraded(world):
    _pile_up(world["a"].org.id)
    cap = services.OWED_COUNT_CAP

    with CaptureQueriesContext(connection) as ctx:
        r = Client().get("/healthz")  # loopback: the full report
    assert r.status_code == 200, r.content
    counts = [q["sql"] for q in ctx.captured_queries if "COUNT(" in q["sql"].upper()]
    assert counts and all("LIMIT" in sql.upper() for sql in counts), counts

    body = r.json()
    assert {"followups", "ingest"} <= set(body["degraded"])
    followups, ingest = body["checks"]["followups"], body["checks"]["ingest"]
    for check in (followups, ingest):
        assert check["status"] == "degraded"
        assert (check["pending"], check["overdue"], check["failing"]) == (cap, cap, FAILING)
        assert check["pending_capped"] is True
        assert f"{cap}+ of {cap}+" in check["detail"] and f"{FAILING} " in check["detail"], check["detail"]

    # The public answer costs the same bounded reads and carries the statuses alone.
    with CaptureQueriesContext(connection) as ctx:
        r = Client().get("/healthz", REMOTE_ADDR="203.0.113.9", HTTP_X_FORWARDED_FOR="203.0.113.9")
    assert r.json()["checks"]["followups"] == {"status": "degraded"}
    assert all("LIMIT" in q["sql"].upper() for q in ctx.captured_queries if "COUNT(" in q["sql"].upper())


def test_below_the_cap_the_counts_are_exact_and_keep_their_shape(world):
    org_id = world["a"].org.id
    _pile_up(org_id)
    # Keep the newest 5 of each, none failing: exact counts, no cap flag, still overdue.
    keep_f = list(Followup.objects.order_by("-id").values_list("id", flat=True)[:5])
    Followup.objects.exclude(id__in=keep_f).delete()
    keep_b = list(IngestBatch.objects.order_by("-id").values_list("id", flat=True)[:5])
    IngestBatch.objects.exclude(id__in=keep_b).delete()

    assert services.followup_counts(org_id=None, grace_secs=120) == {"pending": 5, "overdue": 5, "failing": 0}
    assert services.followup_counts(org_id=org_id, grace_secs=120) == {"pending": 5, "overdue": 5, "failing": 0}
    assert services.followup_counts(org_id=world["b"].org.id, grace_secs=120) == {
        "pending": 0, "overdue": 0, "failing": 0}
    assert services.batch_counts(retry_after_secs=300) == {"pending": 5, "overdue": 5, "failing": 0}
    # Fresh work is pending, not overdue: ok.
    Followup.objects.update(created_at=timezone.now())
    assert services.followup_counts(org_id=None, grace_secs=120) == {"pending": 5, "overdue": 0, "failing": 0}
