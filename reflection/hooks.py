"""Where memory writes hand over to background work. Called after commit; never fails a write.
Nothing here is the only copy of the work: follow-ups are rows in ``memory.Followup`` (re-sent by
``memory.followup_sweep``), sessions stay PENDING in Postgres (re-found by ``reflection.tick``)
and bulk batches stay unfinished (``memory.ingest_sweep``)."""

from __future__ import annotations

import logging
import threading
from collections import Counter

from django.conf import settings
from django.db import transaction

log = logging.getLogger("nylon.reflection")

# Enqueue failures in this process, by task name. Redis is the broker, so a failure usually means
# Redis is down too: the count cannot live there; the durable view is the pending Followup rows.
enqueue_failures: Counter[str] = Counter()
_failures_lock = threading.Lock()


def _send(task, *args) -> bool:
    """Enqueue; True when the broker took the message (or enqueuing is off in this process)."""
    if not settings.NYLON_ENQUEUE_TASKS:
        return True
    try:
        task.delay(*args)
    except Exception as exc:  # broker down: the work is re-found from durable state by the beat
        with _failures_lock:
            enqueue_failures[task.name] += 1
            failures = sum(enqueue_failures.values())
        log.warning("could not enqueue %s%s (%d enqueue failures in this process; the beat re-sends it): %s",
                    task.name, args, failures, exc)
        return False
    return True


def send_followup(*, followup_id: int, org_id: int, node_ids: list[int]) -> bool:
    """The conflict check a ``memory.Followup`` row stands for; the task deletes the row when done."""
    from .tasks import detect_conflicts

    return _send(detect_conflicts, org_id, list(node_ids), followup_id)


def _send_abstraction(session_id: int) -> None:
    """Enqueue a session's abstraction and start its retry clock. Without the stamp the tick saw a
    PENDING session never tried and sent it again at once: duplicate paid requests. Not stamped
    when nothing went to the broker (down, or enqueuing off here): the next tick sends it."""
    from . import services
    from .tasks import abstract_session

    if _send(abstract_session, session_id) and settings.NYLON_ENQUEUE_TASKS:
        try:
            services.stamp_abstraction_sent([session_id])
        except Exception as exc:  # never fails a write; the tick's duplicate is only a wasted call
            log.warning("abstraction of session %s sent but not stamped: %s", session_id, exc)


def after_weave(*, ended_session_id: int) -> None:
    """Abstraction of the session a weave ended (its conflict check goes through ``send_followup``)."""
    _send_abstraction(ended_session_id)


def enqueue_abstractions(session_ids: list[int]) -> None:
    from .tasks import abstract_session

    for sid in session_ids:
        transaction.on_commit(lambda sid=sid: _send(abstract_session, sid), robust=True)


def enqueue_reflections(session_ids: list[int]) -> None:
    from .tasks import reflect_session

    for sid in session_ids:
        transaction.on_commit(lambda sid=sid: _send(reflect_session, sid), robust=True)


def after_bulk_ingest(*, batch_id: int, ended_session_ids: list[int]) -> None:
    """After a bulk ingest commits (or when the beat finds its batch unfinished): the work it
    deferred (vectors, entity/similarity edges, then conflict checks) and abstraction of the
    sessions it ended."""
    from memory.tasks import enrich_batch

    _send(enrich_batch, batch_id)
    for sid in ended_session_ids:
        _send_abstraction(sid)
