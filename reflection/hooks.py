"""Where memory writes hand over to background work. Called after commit; never fails a write
(the beat re-finds anything that was not enqueued: sessions stay PENDING in Postgres)."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction

log = logging.getLogger("nylon.reflection")


def _send(task, *args) -> None:
    if not settings.NYLON_ENQUEUE_TASKS:
        return
    try:
        task.delay(*args)
    except Exception as exc:  # broker down: the beat tick retries from durable state
        log.warning("could not enqueue %s%s: %s", task.name, args, exc)


def after_weave(*, org_id: int, node_ids: list[int], ended_session_id: int | None = None) -> None:
    from .tasks import abstract_session, detect_conflicts

    if node_ids:
        _send(detect_conflicts, org_id, list(node_ids))
    if ended_session_id is not None:
        _send(abstract_session, ended_session_id)


def on_commit_detect(org_id: int, node_ids: list[int]) -> None:
    from .tasks import detect_conflicts

    transaction.on_commit(lambda: _send(detect_conflicts, org_id, list(node_ids)), robust=True)


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

    from .tasks import abstract_session

    _send(enrich_batch, batch_id)
    for sid in ended_session_ids:
        _send(abstract_session, sid)
