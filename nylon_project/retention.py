"""Data retention: rows that only record what happened are deleted once past their age; memory
itself (nodes, edges, sessions, assets, grants) is the product and is never touched here, nor is a
row that stands for work still owed.

What each table keeps, and why (the settings are in ``nylon_project/settings.py``; 0 = forever):

- ``audit`` (``assets.AuditEvent``), ``NYLON_AUDIT_RETENTION_DAYS``, 365. The audit trail is a
  compliance record (who read, changed or was refused what): a year covers the usual annual
  review. Its readers (``GET audit``, the console's audit page) page the newest rows; the worker
  probe reads an entry it wrote seconds earlier.
- ``ingest_batches`` (``memory.IngestBatch``), ``NYLON_INGEST_BATCH_RETENTION_DAYS``, 7. Only
  ``done`` batches, and only once both written and finished that long ago: a batch is then just
  the status handle a client polls (``GET memories/bulk/{id}``, answered within minutes); its
  leaves, edges and audit entry stay. ``pending``/``failed`` batches are work the ingest sweep still
  owes (vectors, edges, conflict checks) and are never deleted, whatever their age.
- ``llm_usage`` (``reflection.LlmUsage``), ``NYLON_LLM_USAGE_RETENTION_DAYS``, 400. One row per
  org, day, provider and model, so a small table; nothing in Nylon reads it back today (no chart or
  budget does), it is there for billing reconciliation: 13 months keeps a full year beside the
  month in progress. Only days before the cutoff go, never today's row still being counted.
- ``conflicts`` (``reflection.Conflict``), ``NYLON_CONFLICT_RETENTION_DAYS``, 0 (kept). Only
  resolved ones could go (an open conflict is work for a person). They stay by default because
  they are read: a node's governance and the console's node page list its conflicts with how they
  were resolved, and the row is what stops the same pair being flagged again ("closed for good":
  ``reflection.conflicts.detect`` skips a pair that has one). The table grows with contradictions
  found, not with requests.
- ``sessions`` (``django_session``): console sign-ins past their own expiry, what Django's
  ``clearsessions`` deletes (an expired session is refused anyway).

Deliberately not here: ``memory.Followup`` (a row exists only while its conflict check is owed;
the task deletes it when done, so every row is pending work), ``reflection.SessionWork`` (one row
per memory session, the abstraction's idempotency key ``abstracted_upto``: deleting it would
re-abstract the session), ``memory.RecallMark`` (emptied by its own flush).

Each table is pruned in chunks of ``NYLON_RETENTION_CHUNK`` rows, each its own short transaction
(``DELETE … WHERE pk IN (SELECT pk … ORDER BY <indexed column> LIMIT n)``, read through an index),
so a backlog of millions never holds a lock or a transaction for long; a chunk that waits more than
``LOCK_TIMEOUT_MS`` for a lock (a migration on the table) fails instead of queueing every writer
behind it. A run stops after ``budget_secs`` with ``more`` set (the Celery task then sends itself
again), so one run stays shorter than Celery's visibility timeout and is never redelivered while
it still works. A table that fails is logged as an error and the others still run; the caller
then raises (``RetentionRun.raise_for_errors``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from importlib import import_module

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from . import namespace

log = logging.getLogger("nylon.retention")

# A chunk waiting this long for a lock gives up: DELETE needs only ROW EXCLUSIVE, so what it waits
# for is DDL (a migration, a non-concurrent index build), and waiting would queue writers behind it.
LOCK_TIMEOUT_MS = 5000


@dataclass
class TableRun:
    table: str
    keep: str  # "365 days", "forever", "until expiry"
    deleted: int | None = 0  # on a dry run, how many would be; None: not countable (non-database sessions)
    complete: bool = True  # False: the time budget ran out with rows still due
    error: str = ""
    exc: BaseException | None = field(default=None, repr=False)


@dataclass
class RetentionRun:
    dry_run: bool
    started_at: datetime
    secs: float = 0.0
    tables: list[TableRun] = field(default_factory=list)

    @property
    def more(self) -> bool:
        return any(not t.complete for t in self.tables)

    @property
    def failed(self) -> list[TableRun]:
        return [t for t in self.tables if t.exc is not None]

    @property
    def deleted(self) -> int:
        return sum(t.deleted or 0 for t in self.tables)

    def summary(self) -> str:
        return " ".join(f"{t.table}={'failed' if t.exc else '-' if t.deleted is None else t.deleted}"
                        + ("+" if not t.complete else "") for t in self.tables)

    def as_dict(self) -> dict:
        return {"dry_run": self.dry_run, "started_at": self.started_at.isoformat(), "secs": round(self.secs, 3),
                "more": self.more, "tables": {t.table: {"keep": t.keep, "deleted": t.deleted, "complete": t.complete,
                                                        **({"error": t.error} if t.error else {})}
                                              for t in self.tables}}

    def raise_for_errors(self) -> None:
        """Re-raise the first table's failure, so a Celery task fails (and retries a transient
        database error with back-off) instead of reporting success."""
        if self.failed:
            raise self.failed[0].exc


@dataclass(frozen=True)
class Policy:
    table: str
    keep: str
    rows: Callable[[datetime], QuerySet] | None  # rows past retention at ``now``; None: kept forever
    order: tuple[str, ...] = ()  # the indexed column each chunk is read through


def _days(n: int) -> str:
    return "forever" if n <= 0 else f"{n} days"


def _older(days: int, build: Callable[[datetime], QuerySet]) -> Callable[[datetime], QuerySet] | None:
    return None if days <= 0 else (lambda now: build(now - timedelta(days=days)))


def policies() -> list[Policy]:
    """The tables in the order a run prunes them: the small ones first, so a budget spent on the
    audit trail's backlog does not starve them."""
    from assets.models import AuditEvent
    from memory.models import IngestBatch
    from reflection.models import Conflict, LlmUsage

    batch_days = settings.NYLON_INGEST_BATCH_RETENTION_DAYS
    usage_days = settings.NYLON_LLM_USAGE_RETENTION_DAYS
    conflict_days = settings.NYLON_CONFLICT_RETENTION_DAYS
    audit_days = settings.NYLON_AUDIT_RETENTION_DAYS
    sessions = _session_model()
    return [
        Policy("sessions", "until expiry",
               (lambda now: sessions.objects.filter(expire_date__lt=now)) if sessions else None, ("expire_date",)),
        # created_at as well as finished_at: the (status, created_at) index reads only the old ones.
        Policy("ingest_batches", _days(batch_days), _older(batch_days, lambda cut: IngestBatch.objects.filter(
            status=IngestBatch.Status.DONE, created_at__lt=cut, finished_at__lt=cut)), ("created_at",)),
        Policy("llm_usage", _days(usage_days),
               _older(usage_days, lambda cut: LlmUsage.objects.filter(day__lt=cut.date())), ("day",)),
        Policy("conflicts", _days(conflict_days), _older(conflict_days, lambda cut: Conflict.objects.exclude(
            status=Conflict.Status.OPEN).filter(resolved_at__lt=cut)), ("resolved_at",)),
        Policy("audit", _days(audit_days),
               _older(audit_days, lambda cut: AuditEvent.objects.filter(created_at__lt=cut)), ("created_at",)),
    ]


def _session_store():
    return import_module(settings.SESSION_ENGINE).SessionStore


def _session_model():
    """The sessions' model when they live in the database (Django's db and cached_db engines)."""
    store = _session_store()
    return store.get_model_class() if hasattr(store, "get_model_class") else None


def prune(*, dry_run: bool = False, now: datetime | None = None, chunk: int | None = None,
          budget_secs: float | None = None, lock_timeout_ms: int | None = None) -> RetentionRun:
    """Delete (``dry_run``: count) every table's rows past retention. Not one transaction on
    purpose: each chunk commits on its own (see the module's docstring)."""
    now = now or timezone.now()
    chunk = chunk or settings.NYLON_RETENTION_CHUNK
    lock_timeout_ms = lock_timeout_ms or LOCK_TIMEOUT_MS
    started = time.monotonic()
    deadline = None if budget_secs is None else started + budget_secs
    run = RetentionRun(dry_run=dry_run, started_at=now)
    for policy in policies():
        result = TableRun(policy.table, policy.keep)
        run.tables.append(result)
        try:
            if policy.rows is None:
                if policy.table == "sessions":  # sessions not in the database: their engine expires them
                    result.deleted = None
                    if not dry_run:
                        _session_store().clear_expired()  # what clearsessions does
                continue
            rows = policy.rows(now)
            if dry_run:
                result.deleted = rows.count()
            else:
                result.deleted, result.complete = _delete_chunks(
                    rows, policy.order, chunk=chunk, deadline=deadline, lock_timeout_ms=lock_timeout_ms)
        except Exception as exc:
            result.exc, result.error = exc, f"{type(exc).__name__}: {exc}"[:300]
            log.error("retention: pruning %s failed (the other tables still run): %s", policy.table, result.error,
                      exc_info=True)
    run.secs = time.monotonic() - started
    if dry_run:
        log.info("retention (dry run): would delete %s; counted in %.1fs", run.summary(), run.secs)
    else:
        log.info("retention: deleted %s in %.1fs%s", run.summary(), run.secs,
                 "; time budget spent, more to delete (+)" if run.more else "")
        _remember(run)
    return run


def _delete_chunks(rows: QuerySet, order: tuple[str, ...], *, chunk: int, deadline: float | None,
                   lock_timeout_ms: int) -> tuple[int, bool]:
    """(rows deleted, whether none is left due). Each chunk its own transaction."""
    model = rows.model
    deleted = 0
    while True:
        with transaction.atomic():
            with connection.cursor() as cur:
                cur.execute("SELECT set_config('lock_timeout', %s, true)", [f"{lock_timeout_ms}ms"])
            # No related rows and no delete signals: Django sends this as one DELETE … WHERE pk IN
            # (SELECT … LIMIT n), without loading the rows.
            n, _ = model.objects.filter(pk__in=rows.order_by(*order).values("pk")[:chunk]).delete()
        deleted += n
        if n < chunk:
            return deleted, True
        if deadline is not None and time.monotonic() >= deadline:
            return deleted, False


def _last_run_key() -> str:
    # Written by the worker's run, read by web's /healthz (namespace.state_scope).
    return f"retention:last_run:{namespace.state_scope()}"


def _remember(run: RetentionRun) -> None:
    """The last run, for an operator (``last_run``): in Redis, shared by every process."""
    try:
        cache.set(_last_run_key(), {**run.as_dict(), "finished_at": timezone.now().isoformat()}, timeout=None)
    except Exception as exc:
        log.warning("retention: last run not recorded (Redis unavailable): %s", exc)


def last_run() -> dict | None:
    """What the last (non-dry) run deleted and when it finished, or None (never run, or Redis
    unavailable or emptied)."""
    try:
        return cache.get(_last_run_key())
    except Exception as exc:
        log.warning("retention: last run unknown (Redis unavailable): %s", exc)
        return None
