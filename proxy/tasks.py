"""Proxy background tasks: they take ids and call services."""

from __future__ import annotations

from celery import shared_task

from nylon_project.celery import TRANSIENT_RETRY


@shared_task(acks_late=True, name="proxy.write_back", **TRANSIENT_RETRY)
def write_back_task(key_id: int, session_key: str, turns: list[dict]) -> list[int]:
    """Weave a proxied exchange (idempotent: the turns carry event ids)."""
    from .writeback import write_back

    return write_back(key_id=key_id, session_key=session_key, turns=turns)
