"""Data retention (nylon_project/retention.py): what goes, what stays whatever its age, in chunks,
the dry run and the command, the beat entry, and the task run by a real worker."""

from __future__ import annotations

import io
import logging
import re
from datetime import timedelta

import psycopg
import pytest
from django.contrib.sessions.models import Session
from django.core.management import CommandError, call_command
from django.db import OperationalError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from assets.models import AuditEvent
from memory.models import Edge, EdgeKind, Followup, IngestBatch, Node
from nylon_project import health, retention
from nylon_project.beat_lock import _conninfo
from reflection.models import Conflict, LlmUsage
from tests.settings_loader import load_settings, settings_values

pytestmark = pytest.mark.django_db


def _aged(model, ids, field: str, days: float) -> None:
    model.objects.filter(pk__in=ids).update(**{field: timezone.now() - timedelta(days=days)})


def _audit(org, days: float, n: int = 1) -> list[int]:
    made = AuditEvent.objects.bulk_create([AuditEvent(org=org, actor_kind="system", actor_label="system",
                                                      action="test.retention", object_type="test")
                                           for _ in range(n)])
    ids = [e.id for e in made]
    _aged(AuditEvent, ids, "created_at", days)
    return ids


def _batch(world, status: str, *, created_days: float, finished_days: float | None = None) -> int:
    b = IngestBatch.objects.create(org=world["a"].org, owner_agent=world["a"].agent, node_ids=[1, 2, 3],
                                   status=status)
    now = timezone.now()
    IngestBatch.objects.filter(pk=b.id).update(
        created_at=now - timedelta(days=created_days),
        finished_at=None if finished_days is None else now - timedelta(days=finished_days))
    return b.id


def _nodes(world, n: int, *, days: float = 0) -> list[Node]:
    now = timezone.now()
    made = Node.objects.bulk_create([Node(org=world["a"].org, owner_user=world["a"].owner, text=f"fact {i}",
                                          occurred_at=now, tension_updated_at=now) for i in range(n)])
    _aged(Node, [m.id for m in made], "created_at", days)
    return made


def _conflict(world, a: Node, b: Node, *, status: str, resolved_days: float | None) -> int:
    c = Conflict.objects.create(org=world["a"].org, node_a=a, node_b=b, reason="r", detector="rule", status=status)
    now = timezone.now()
    Conflict.objects.filter(pk=c.id).update(
        created_at=now - timedelta(days=1000),
        resolved_at=None if resolved_days is None else now - timedelta(days=resolved_days))
    return c.id


def _left(model, ids) -> set:
    return set(model.objects.filter(pk__in=ids).values_list("pk", flat=True))


# --- what goes and what stays ---------------------------------------------------------------------


def test_audit_events_past_retention_go_and_younger_ones_stay(world, settings):
    settings.NYLON_AUDIT_RETENTION_DAYS = 365
    org = world["a"].org
    old = _audit(org, 400) + _audit(org, 365.01)
    young = _audit(org, 364.9) + _audit(org, 10) + _audit(org, 0)
    run = retention.prune()
    assert _left(AuditEvent, old + young) == set(young)
    audit = next(t for t in run.tables if t.table == "audit")
    assert (audit.keep, audit.deleted, audit.complete) == ("365 days", 2, True)


def test_zero_keeps_audit_events_forever(world, settings):
    settings.NYLON_AUDIT_RETENTION_DAYS = 0
    ancient = _audit(world["a"].org, 5000)
    run = retention.prune()
    assert _left(AuditEvent, ancient) == set(ancient)
    audit = next(t for t in run.tables if t.table == "audit")
    assert (audit.keep, audit.deleted) == ("forever", 0)


def test_only_finished_bulk_batches_go_and_never_pending_or_failed_ones(world, settings):
    settings.NYLON_INGEST_BATCH_RETENTION_DAYS = 7
    done_old = _batch(world, "done", created_days=30, finished_days=30)
    done_young = _batch(world, "done", created_days=1, finished_days=1)
    # written long ago, failing for weeks, finished yesterday: its status is still fresh news
    done_late = _batch(world, "done", created_days=30, finished_days=1)
    pending = _batch(world, "pending", created_days=400)
    failed = _batch(world, "failed", created_days=400)
    retention.prune()
    assert _left(IngestBatch, [done_old, done_young, done_late, pending, failed]) == {
        done_young, done_late, pending, failed}


def test_follow_ups_are_never_pruned_whatever_their_age(world, settings):
    """Every Followup row is a conflict check still owed (the task deletes it once done)."""
    settings.NYLON_AUDIT_RETENTION_DAYS = settings.NYLON_INGEST_BATCH_RETENTION_DAYS = 1
    f = Followup.objects.create(org=world["a"].org, node_ids=[1])
    Followup.objects.filter(pk=f.id).update(created_at=timezone.now() - timedelta(days=1000), attempts=50)
    retention.prune()
    assert Followup.objects.filter(pk=f.id).exists()


def test_llm_usage_before_the_window_goes_and_the_window_stays(world, settings):
    settings.NYLON_LLM_USAGE_RETENTION_DAYS = 400
    today = timezone.now().date()
    rows = {age: LlmUsage.objects.create(org=world["a"].org, day=today - timedelta(days=age), provider="openai",
                                         model="m", calls=1).id for age in (402, 401, 399, 0)}
    retention.prune()
    assert _left(LlmUsage, rows.values()) == {rows[399], rows[0]}


def test_resolved_conflicts_are_kept_by_default(world, settings):
    a, b = _nodes(world, 2, days=1000)
    resolved = _conflict(world, a, b, status="rejected", resolved_days=900)
    run = retention.prune()
    assert _left(Conflict, [resolved]) == {resolved}
    assert next(t.keep for t in run.tables if t.table == "conflicts") == "forever"


def test_resolved_conflicts_past_the_setting_go_and_open_ones_never(world, settings):
    settings.NYLON_CONFLICT_RETENTION_DAYS = 30
    n = _nodes(world, 8, days=1000)
    old_kept = _conflict(world, n[0], n[1], status="kept_both", resolved_days=31)
    old_superseded = _conflict(world, n[2], n[3], status="superseded", resolved_days=31)
    young = _conflict(world, n[4], n[5], status="rejected", resolved_days=29)
    open_ancient = _conflict(world, n[6], n[7], status="open", resolved_days=None)
    Edge.objects.create(org=world["a"].org, src=n[0], dst=n[1], kind=EdgeKind.CONTRADICTS)
    retention.prune()
    assert _left(Conflict, [old_kept, old_superseded, young, open_ancient]) == {young, open_ancient}
    # the memories and the contradicts edge are the product: only the bookkeeping row went
    assert Node.objects.filter(pk__in=[x.id for x in n]).count() == 8
    assert Edge.objects.filter(src=n[0], dst=n[1], kind=EdgeKind.CONTRADICTS).exists()


def test_expired_console_sessions_go(db):
    now = timezone.now()
    Session.objects.create(session_key="expired" + "x" * 25, session_data="", expire_date=now - timedelta(seconds=5))
    Session.objects.create(session_key="live" + "y" * 28, session_data="", expire_date=now + timedelta(days=1))
    run = retention.prune()
    assert set(Session.objects.values_list("session_key", flat=True)) >= {"live" + "y" * 28}
    assert not Session.objects.filter(session_key="expired" + "x" * 25).exists()
    assert next(t for t in run.tables if t.table == "sessions").deleted >= 1


def test_memory_nodes_and_edges_are_never_touched(world, settings):
    for name in ("NYLON_AUDIT_RETENTION_DAYS", "NYLON_INGEST_BATCH_RETENTION_DAYS",
                 "NYLON_LLM_USAGE_RETENTION_DAYS", "NYLON_CONFLICT_RETENTION_DAYS"):
        setattr(settings, name, 1)
    a, b = _nodes(world, 2, days=5000)
    Edge.objects.create(org=world["a"].org, src=a, dst=b, kind=EdgeKind.SIMILAR)
    Edge.objects.filter(src=a).update(created_at=timezone.now() - timedelta(days=5000))
    _conflict(world, a, b, status="rejected", resolved_days=5000)
    _audit(world["a"].org, 5000)
    nodes, edges = Node.objects.count(), Edge.objects.count()
    with CaptureQueriesContext(connection) as queries:
        run = retention.prune()
    assert run.deleted >= 2  # the conflict row and the audit event went
    assert (Node.objects.count(), Edge.objects.count()) == (nodes, edges)
    assert not [q["sql"] for q in queries.captured_queries if re.search(r'"memory_(node|edge)"', q["sql"])]


# --- chunks, time budget, dry run -----------------------------------------------------------------


def test_more_rows_than_one_chunk_go_in_bounded_deletes(world, settings):
    settings.NYLON_AUDIT_RETENTION_DAYS = 30
    old = _audit(world["a"].org, 60, n=11)
    young = _audit(world["a"].org, 1, n=2)
    with CaptureQueriesContext(connection) as queries:
        run = retention.prune(chunk=4)
    assert _left(AuditEvent, old + young) == set(young)
    deletes = [q["sql"] for q in queries.captured_queries
               if q["sql"].startswith('DELETE FROM "assets_auditevent"')]
    assert len(deletes) == 3  # 4 + 4 + 3: the short chunk ends it
    assert all("LIMIT 4" in sql for sql in deletes)
    assert next(t.deleted for t in run.tables if t.table == "audit") == 11


def test_a_spent_time_budget_stops_after_a_chunk_and_says_more_is_due(world, settings, caplog):
    settings.NYLON_AUDIT_RETENTION_DAYS = 30
    old = _audit(world["a"].org, 60, n=11)
    with caplog.at_level(logging.INFO, logger="nylon.retention"):
        run = retention.prune(chunk=4, budget_secs=0)
    assert len(_left(AuditEvent, old)) == 7
    audit = next(t for t in run.tables if t.table == "audit")
    assert (audit.deleted, audit.complete, run.more) == (4, False, True)
    assert "audit=4+" in caplog.text and "more to delete" in caplog.text


def test_dry_run_counts_and_deletes_nothing(world, settings):
    settings.NYLON_AUDIT_RETENTION_DAYS = 30
    settings.NYLON_INGEST_BATCH_RETENTION_DAYS = 7
    old = _audit(world["a"].org, 60, n=3)
    batch = _batch(world, "done", created_days=30, finished_days=30)
    dry = retention.prune(dry_run=True)
    assert _left(AuditEvent, old) == set(old) and _left(IngestBatch, [batch]) == {batch}
    counted = {t.table: t.deleted for t in dry.tables}
    done = {t.table: t.deleted for t in retention.prune().tables}
    assert counted == done and done["audit"] == 3 and done["ingest_batches"] == 1


def test_one_info_line_per_run_and_the_last_run_is_kept(world, settings, caplog):
    settings.NYLON_AUDIT_RETENTION_DAYS = 30
    _audit(world["a"].org, 60, n=2)
    with caplog.at_level(logging.INFO, logger="nylon.retention"):
        run = retention.prune()
    lines = [r for r in caplog.records if r.name == "nylon.retention"]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO
    assert re.search(r"retention: deleted sessions=\d+ ingest_batches=0 llm_usage=0 conflicts=0 audit=2 in ",
                     lines[0].getMessage())
    last = retention.last_run()  # real Redis: what an operator (or /healthz) can read
    assert last["started_at"] == run.started_at.isoformat()
    assert last["tables"]["audit"] == {"keep": "30 days", "deleted": 2, "complete": True}
    check = health._timed(health._retention)  # what /healthz shows an operator
    assert check["status"] == "ok" and check["deleted"]["audit"] == 2 and check["finished_at"]


@pytest.fixture(autouse=True)
def _no_last_run_left_behind():
    """The last run is kept in the shared Redis, per database: a failed run recorded here would
    leave /healthz degraded for the tests that come after."""
    from django.core.cache import cache

    yield
    cache.delete(retention._last_run_key())


# --- a failing table degrades visibly ---------------------------------------------------------------


@pytest.fixture
def conflicts_locked(db):
    """Another session holds an ACCESS EXCLUSIVE lock on reflection_conflict (a migration would)."""
    with psycopg.connect(_conninfo(), autocommit=False) as other:
        other.execute("LOCK TABLE reflection_conflict IN ACCESS EXCLUSIVE MODE")
        yield
        other.rollback()


def test_a_table_that_fails_is_logged_the_others_still_run_and_the_run_raises(world, settings, caplog,
                                                                               conflicts_locked):
    settings.NYLON_AUDIT_RETENTION_DAYS = settings.NYLON_CONFLICT_RETENTION_DAYS = 30
    old = _audit(world["a"].org, 60, n=2)
    with caplog.at_level(logging.INFO, logger="nylon.retention"):
        run = retention.prune(lock_timeout_ms=200)
    assert [t.table for t in run.failed] == ["conflicts"]
    assert _left(AuditEvent, old) == set()  # the table after the failing one was still pruned
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert errors and "pruning conflicts failed" in errors[0].getMessage()
    assert "conflicts=failed" in caplog.text
    with pytest.raises(OperationalError):  # the Celery task fails (and retries) instead of succeeding
        run.raise_for_errors()
    check = health._timed(health._retention)  # and /healthz says so until a run succeeds
    assert check["status"] == "degraded" and "conflicts failed" in check["detail"], check
    assert check["deleted"]["audit"] == 2


# --- indexes ---------------------------------------------------------------------------------------


def test_every_chunk_is_read_through_an_index(world, settings):
    """With sequential scans priced out, each table's chunk query reads a range of an index that
    leads with its cutoff column (for bulk batches: status, then created_at), not the whole table.
    Without reflection 0002, conflicts fall back to a Seq Scan, and llm_usage to its unique index
    (org first), which only Postgres 18's skip scan reads by day (compose runs Postgres 17). (A
    table this small would be scanned anyway; the tables these run on are not.)"""
    for name in ("NYLON_AUDIT_RETENTION_DAYS", "NYLON_INGEST_BATCH_RETENTION_DAYS",
                 "NYLON_LLM_USAGE_RETENTION_DAYS", "NYLON_CONFLICT_RETENTION_DAYS"):
        setattr(settings, name, 30)
    leads = {"ingest_batches": "status"}
    now = timezone.now()
    with connection.cursor() as cur:
        cur.execute("SET LOCAL enable_seqscan = off")
        for policy in retention.policies():
            sql, params = policy.rows(now).order_by(*policy.order).values("pk")[:5000].query.sql_with_params()
            cur.execute("EXPLAIN " + sql, params)
            plan = "\n".join(r[0] for r in cur.fetchall())
            assert re.search(rf"Index Cond: .*\b{policy.order[0]} <", plan), f"{policy.table}:\n{plan}"
            used = re.findall(r"(?:Index (?:Only )?Scan (?:Backward )?using|Bitmap Index Scan on) (\w+)", plan)
            cur.execute("SELECT a.attname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                        "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] "
                        "WHERE c.relname = ANY(%s)", [used])
            firsts = {r[0] for r in cur.fetchall()}
            assert leads.get(policy.table, policy.order[0]) in firsts, f"{policy.table}:\n{plan}"


# --- the command -------------------------------------------------------------------------------------


def test_the_command_prints_per_table_counts_dry_run_first(world, settings):
    settings.NYLON_AUDIT_RETENTION_DAYS = 30
    old = _audit(world["a"].org, 60, n=3)
    out = io.StringIO()
    call_command("nylon_prune", "--dry-run", stdout=out)
    text = out.getvalue()
    assert re.search(r"^table\s+keep\s+would delete$", text, re.M)
    assert re.search(r"^audit\s+30 days\s+3$", text, re.M)
    assert re.search(r"^conflicts\s+forever\s+0$", text, re.M)
    assert "dry run: nothing deleted" in text
    assert _left(AuditEvent, old) == set(old)
    out = io.StringIO()
    call_command("nylon_prune", stdout=out)
    assert re.search(r"^audit\s+30 days\s+3$", out.getvalue(), re.M)
    assert re.search(r"^table\s+keep\s+deleted$", out.getvalue(), re.M)
    assert _left(AuditEvent, old) == set()


def test_the_command_fails_when_a_table_fails(world, settings, conflicts_locked, monkeypatch):
    settings.NYLON_CONFLICT_RETENTION_DAYS = 30
    monkeypatch.setattr(retention, "LOCK_TIMEOUT_MS", 200)  # a shorter wait, the same behaviour
    out = io.StringIO()
    with pytest.raises(CommandError, match="retention failed for conflicts"):
        call_command("nylon_prune", stdout=out)
    assert re.search(r"^conflicts\s+30 days\s+failed\s+OperationalError", out.getvalue(), re.M)


# --- schedule and settings --------------------------------------------------------------------------


def test_the_beat_runs_retention_daily_by_default():
    from django.conf import settings

    from nylon_project.celery import app

    entry = settings.CELERY_BEAT_SCHEDULE["retention"]
    assert entry == {"task": "nylon_project.retention", "schedule": 86400}
    app.loader.import_default_modules()  # what a worker does at start: autodiscovery
    assert "nylon_project.retention" in app.tasks


def test_retention_settings_from_the_environment(tmp_path):
    names = ("CELERY_BEAT_SCHEDULE", "NYLON_AUDIT_RETENTION_DAYS", "NYLON_INGEST_BATCH_RETENTION_DAYS",
             "NYLON_LLM_USAGE_RETENTION_DAYS", "NYLON_CONFLICT_RETENTION_DAYS", "NYLON_RETENTION_CHUNK",
             "NYLON_RETENTION_MAX_SECS")
    defaults = settings_values(load_settings(tmp_path, names, NYLON_RETENTION_EVERY_SECS=""))
    assert defaults["CELERY_BEAT_SCHEDULE"]["retention"]["schedule"] == 86400
    assert [defaults[n] for n in names[1:]] == [365, 7, 400, 0, 5000, 300]
    set_ = settings_values(load_settings(tmp_path, names, NYLON_RETENTION_EVERY_SECS="3600",
                                         NYLON_AUDIT_RETENTION_DAYS="90", NYLON_RETENTION_CHUNK="1000"))
    assert set_["CELERY_BEAT_SCHEDULE"]["retention"]["schedule"] == 3600
    assert (set_["NYLON_AUDIT_RETENTION_DAYS"], set_["NYLON_RETENTION_CHUNK"]) == (90, 1000)
    for bad, says in ({"NYLON_AUDIT_RETENTION_DAYS": "-1"}, "NYLON_AUDIT_RETENTION_DAYS: -1 is negative"), (
            {"NYLON_RETENTION_CHUNK": "0"}, "NYLON_RETENTION_CHUNK: 0 must be at least 1"), (
            {"NYLON_RETENTION_EVERY_SECS": "0"}, "NYLON_RETENTION_EVERY_SECS must be more than 0"):
        result = load_settings(tmp_path, names, **bad)
        assert result.returncode != 0 and says in result.stderr
