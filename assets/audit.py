"""Append-only audit trail. Called inside the caller's transaction so the entry commits (or
rolls back) with the change it describes."""

from __future__ import annotations

from .models import AuditEvent


def record(
    *,
    actor,
    action: str,
    object_type: str,
    object_id: object = "",
    outcome: str = AuditEvent.Outcome.DONE,
    reason: str = "",
    detail: dict | None = None,
    request_id: str = "",
    org=None,
) -> AuditEvent:
    if actor is None:
        kind, aid, label = "system", None, "system"
        org = org
    else:
        kind, aid, label = actor.kind, actor.id, actor.label
        org = org or actor.org
    object_id = str(object_id)
    if len(object_id) > 64:  # e.g. a session key (up to 200 characters): the whole id goes in detail
        detail = {**(detail or {}), "object_id": object_id}
    return AuditEvent.objects.create(
        org=org,
        actor_kind=kind,
        actor_id=aid,
        actor_label=label[:255],
        action=action,
        object_type=object_type,
        object_id=object_id[:64],
        outcome=outcome,
        reason=reason[:255],
        detail=detail or {},
        request_id=request_id,
    )


def record_denial(*, actor, exc, action: str, object_type: str, url_kwargs: dict, request_id: str = "") -> None:
    """A refusal that reached the API's or the console's error handling (raised deep in a service,
    whose own transaction rolled back, or by ``teams.access``): recorded once, so not again when
    the access module already recorded it (``exc.audited``). The object is the request's first
    ``*_id`` URL argument."""
    if actor is None or getattr(exc, "audited", False):
        return
    object_id = next((str(v) for k, v in url_kwargs.items() if k.endswith("_id")), "")
    record(actor=actor, action=action[:64], object_type=object_type, object_id=object_id,
           outcome=AuditEvent.Outcome.DENIED, reason=str(getattr(exc, "detail", exc)), request_id=request_id)
