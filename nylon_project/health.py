"""/healthz: database (with pgvector), Redis, Celery worker ping, embedder and LLM state, and the
post-commit follow-ups still owed."""

from __future__ import annotations

import time

from django.conf import settings
from django.db import connection
from django.http import JsonResponse


def _timed(fn) -> dict:
    t = time.perf_counter()
    try:
        out = fn() or {}
        out.setdefault("status", "ok")
    except Exception as exc:  # a health check reports failures, it does not raise them
        out = {"status": "down", "detail": f"{type(exc).__name__}: {exc}"[:300]}
    out["ms"] = round((time.perf_counter() - t) * 1000, 1)
    return out


def _database() -> dict:
    with connection.cursor() as cur:
        cur.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cur.fetchone()
    if row is None:
        return {"status": "degraded", "detail": "pgvector extension missing (run migrations)"}
    return {"pgvector": row[0]}


def _redis() -> dict:
    import redis

    redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1).ping()
    return {}


def _worker() -> dict:
    from nylon_project.celery import app

    # limit=1: return on the first reply instead of always waiting out the timeout.
    replies = app.control.ping(timeout=1.0, limit=1) or []
    if not replies:
        return {"status": "down", "detail": "no Celery worker answered a ping"}
    return {"workers": sorted(name for r in replies for name in r)}


def _embedder() -> dict:
    from memory.embedding import get_embedder

    emb = get_embedder()
    if emb.state.status == "unknown":
        emb.query("health probe")
    return emb.state.as_dict()


def _followups() -> dict:
    """Post-commit follow-ups (conflict checks) still owed, over every org. Overdue ones lost their
    message or keep failing (the sweep re-sends them, backing off); failing ones were re-sent
    ``FOLLOWUP_MAX_ATTEMPTS`` times already. Either makes the service degraded, since writes are
    then missing their checks; both clear by themselves once the work succeeds."""
    from memory.services import FOLLOWUP_MAX_ATTEMPTS, followup_counts
    from nylon_project.celery import FOLLOWUP_GRACE_SECS

    counts = followup_counts(org_id=None, grace_secs=FOLLOWUP_GRACE_SECS)
    reasons = []
    if counts["failing"]:
        reasons.append(f"{counts['failing']} still not done after {FOLLOWUP_MAX_ATTEMPTS} re-sends")
    if counts["overdue"]:
        reasons.append(f"{counts['overdue']} of {counts['pending']} pending are overdue (older than "
                       f"NYLON_FOLLOWUP_GRACE_SECS = {FOLLOWUP_GRACE_SECS:g} s)")
    if reasons:
        return {"status": "degraded", "detail": "post-commit follow-ups: " + "; ".join(reasons), **counts}
    return counts


def _ingest() -> dict:
    """Bulk batches whose deferred work (vectors, entity and similarity edges, conflict checks) is
    not done. Degraded while any is overdue or failing: their memories are written but not linked."""
    from django.conf import settings

    from memory.services import BATCH_MAX_ATTEMPTS, batch_counts

    counts = batch_counts(retry_after_secs=settings.NYLON_INGEST_RETRY_SECS)
    reasons = []
    if counts["failing"]:
        reasons.append(f"{counts['failing']} not finished after {BATCH_MAX_ATTEMPTS} runs (re-sent, backing off)")
    if counts["overdue"]:
        reasons.append(f"{counts['overdue']} of {counts['pending']} never run within twice "
                       f"NYLON_INGEST_RETRY_SECS = {settings.NYLON_INGEST_RETRY_SECS:g} s")
    if reasons:
        return {"status": "degraded", "detail": "bulk batches: " + "; ".join(reasons), **counts}
    return {"status": "ok", **counts}


def _llm() -> dict:
    try:
        from reflection.llm import llm_state
    except ImportError:
        return {"status": "disabled", "detail": "no LLM configured: heuristic fallbacks in use"}
    return llm_state()


def healthz(request):
    checks = {
        "database": _timed(_database),
        "redis": _timed(_redis),
        "worker": _timed(_worker),
        "embedder": _timed(_embedder),
        "llm": _timed(_llm),
        "followups": _timed(_followups),
        "ingest": _timed(_ingest),
    }
    core_ok = all(checks[name]["status"] == "ok" for name in ("database", "redis", "worker"))
    degraded = [name for name, c in checks.items() if c["status"] not in ("ok", "disabled")]
    status = "ok" if core_ok and not degraded else ("degraded" if core_ok else "down")
    return JsonResponse({"status": status, "degraded": degraded, "checks": checks},
                        status=200 if core_ok else 503)
