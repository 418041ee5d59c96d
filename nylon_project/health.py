"""/healthz: database (with pgvector), Redis, Celery worker ping, embedder and LLM state, the
post-commit follow-ups and bulk batches still owed, recalls not yet counted, and the last retention run.

/healthz is unauthenticated, so the full report (exception text naming the DB host and user, worker
hostnames, the LLM endpoint and its last error, counts over every org) goes only to loopback
clients (the compose healthcheck, ``make run`` users) and to callers sending
``Authorization: Bearer <NYLON_HEALTH_TOKEN>``; anyone else gets the statuses alone, with the same
HTTP code.

The HTTP code answers a load balancer's question, "can this node serve requests?": 503 only when
the database is not usable (down, or without pgvector), since no API call works without it. Redis,
the workers, the embedder, the LLM and owed background work being down or behind degrade the
service but the API keeps answering (the rate limit fails open, enqueues are re-found), and they
are shared by every web node: a 503 for them would pull all nodes out of rotation at once and turn
a partial outage into a total one. So those answer 200 with status "degraded" and the names in
"degraded"; monitoring reads the body."""

from __future__ import annotations

import hmac
import threading
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

    # The ping goes out on this database's control exchange (CELERY_CONTROL_EXCHANGE, named after
    # it: nylon_project/namespace.py), so only this instance's workers hear it: with one exchange
    # for every instance on a shared Redis, another instance's worker answered for a dead one here.
    # limit=1: return on the first reply instead of always waiting out the timeout.
    replies = app.control.ping(timeout=1.0, limit=1) or []
    if not replies:
        return {"status": "down", "detail": "no Celery worker answered a ping"}
    return {"workers": sorted(name for r in replies for name in r)}


WORKER_PING_TTL_SECS = 5.0


class _WorkerPing:
    """The worker check, reused for ``WORKER_PING_TTL_SECS`` in this process. A ping is a broadcast
    on the broker that waits up to 1 s for a reply, so a flood of /healthz (which anyone may call)
    would otherwise fan out into as many broadcasts and tie up the web process's sync threads."""

    lock = threading.Lock()
    result: dict | None = None
    at = 0.0

    @classmethod
    def get(cls) -> dict:
        with cls.lock:  # concurrent requests wait for the one ping in flight instead of sending theirs
            if cls.result is None or time.monotonic() - cls.at >= WORKER_PING_TTL_SECS:
                cls.result, cls.at = _timed(_worker), time.monotonic()
            return dict(cls.result)

    @classmethod
    def reset(cls) -> None:
        with cls.lock:
            cls.result = None


def _embedder() -> dict:
    from memory.embedding import get_embedder, shared_states

    emb = get_embedder()
    if emb.state.status == "unknown":
        emb.query("health probe")
    out = emb.state.as_dict()
    # Workers (and other web processes) embed with embedders of their own: one failing there
    # leaves this process's fine, and writes' vectors missing.
    try:
        others = shared_states()
    except Exception as exc:  # Redis down: its own check says so; this one keeps to this process
        out["detail"] = "; ".join(filter(None, [out["detail"], f"other processes' states unavailable: "
                                                               f"{type(exc).__name__}"]))
        return out
    failing = {proc: s for proc, s in others.items() if s.get("status") == "degraded"}
    if failing:
        now = time.time()
        out["status"] = "degraded"
        out["detail"] = "; ".join(filter(None, [out["detail"]] + [
            f"{proc}, {now - s['at']:.0f} s ago: {s.get('detail', '')}" for proc, s in sorted(failing.items())]))
        out["processes_degraded"] = sorted(failing)
    return out


def _followups() -> dict:
    """Post-commit follow-ups (conflict checks) still owed, over every org. Overdue ones lost their
    message or keep failing (the sweep re-sends them, backing off); failing ones were re-sent
    ``FOLLOWUP_MAX_ATTEMPTS`` times already. Either makes the service degraded, since writes are
    then missing their checks; both clear by themselves once the work succeeds."""
    from memory.services import FOLLOWUP_MAX_ATTEMPTS, followup_counts
    from nylon_project.celery import FOLLOWUP_GRACE_SECS

    counts = followup_counts(org_id=None, grace_secs=FOLLOWUP_GRACE_SECS)
    return _owed("post-commit follow-ups", counts,
                 failing=f"still not done after {FOLLOWUP_MAX_ATTEMPTS} re-sends",
                 overdue=f"pending are overdue (older than NYLON_FOLLOWUP_GRACE_SECS = {FOLLOWUP_GRACE_SECS:g} s)")


def _owed(what: str, counts: dict, *, failing: str, overdue: str) -> dict:
    """A check over owed background work: degraded while any of it is overdue or failing. The
    counts stop at a cap (``pending_capped``, as the recalls check): a count at it reads "N+"."""
    from memory.services import OWED_COUNT_CAP

    def n(name: str) -> str:
        more = "+" if counts.get("pending_capped") and counts[name] >= OWED_COUNT_CAP else ""
        return f"{counts[name]}{more}"

    reasons = []
    if counts["failing"]:
        reasons.append(f"{n('failing')} {failing}")
    if counts["overdue"]:
        reasons.append(f"{n('overdue')} of {n('pending')} {overdue}")
    if reasons:
        return {"status": "degraded", "detail": f"{what}: " + "; ".join(reasons), **counts}
    return {"status": "ok", **counts}


def _ingest() -> dict:
    """Bulk batches whose deferred work (vectors, entity and similarity edges, conflict checks) is
    not done. Degraded while any is overdue or failing: their memories are written but not linked."""
    from memory.services import BATCH_MAX_ATTEMPTS, batch_counts

    counts = batch_counts(retry_after_secs=settings.NYLON_INGEST_RETRY_SECS)
    return _owed("bulk batches", counts,
                 failing=f"not finished after {BATCH_MAX_ATTEMPTS} runs (re-sent, backing off)",
                 overdue=f"never run within twice NYLON_INGEST_RETRY_SECS = {settings.NYLON_INGEST_RETRY_SECS:g} s")


def _recalls() -> dict:
    """Buffered recalls (``memory.RecallMark``) the beat has not applied. Degraded once the oldest
    waits well past the flush interval: the beat or the workers are not running, and what agents
    recall stops counting in the ranking."""
    from memory.services import recall_backlog
    from nylon_project.celery import RECALL_FLUSH_SECS

    out = recall_backlog()
    late_after = max(10 * RECALL_FLUSH_SECS, 300.0)
    if out["oldest_secs"] > late_after:
        more = "+" if out["pending_capped"] else ""
        return {"status": "degraded", "detail": f"recall counts: {out['pending']}{more} recalls waiting, the oldest "
                f"{out['oldest_secs']:.0f} s (flushed every NYLON_RECALL_FLUSH_SECS = {RECALL_FLUSH_SECS:g} s)",
                **out}
    return out


def _cache() -> dict:
    """This process's engine cache: degraded while the orgs in use need more than
    NYLON_CACHE_MAX_BYTES (an org served from Postgres for want of room, or rebuilt after an
    eviction, within the last few minutes). Per process: each web process holds its own."""
    from memory.cache import get_cache

    return get_cache().health()


def _retention() -> dict:
    """The last retention run (``nylon_project.retention``, kept in Redis): degraded when a table
    failed in it, since its rows then pile up while everything else looks fine. No record (never
    run yet, or Redis emptied) is not a fault."""
    from nylon_project import retention

    last = retention.last_run()
    if last is None:
        return {"detail": "no run recorded yet"}
    tables = last.get("tables", {})
    failed = {name: t["error"] for name, t in tables.items() if t.get("error")}
    out = {"finished_at": last.get("finished_at"), "more": last.get("more", False),
           "deleted": {name: t.get("deleted") for name, t in tables.items()}}
    if failed:
        return {"status": "degraded", "detail": "retention: " + "; ".join(f"{n} failed ({e})" for n, e in failed.items()),
                **out}
    return out


def _llm() -> dict:
    try:
        from reflection.llm import llm_state
    except ImportError:
        return {"status": "disabled", "detail": "no LLM configured: heuristic fallbacks in use"}
    return llm_state()


LOOPBACK = frozenset({"127.0.0.1", "::1"})
# Set by a reverse proxy: a request carrying one came from elsewhere, whatever REMOTE_ADDR says.
FORWARDING_HEADERS = ("X-Forwarded-For", "Forwarded", "X-Real-Ip")


def _health_token() -> str:
    return settings.NYLON_HEALTH_TOKEN


def _may_see_detail(request) -> bool:
    """Loopback clients and holders of NYLON_HEALTH_TOKEN get the full report."""
    if request.META.get("REMOTE_ADDR") in LOOPBACK and not any(h in request.headers for h in FORWARDING_HEADERS):
        # A reverse proxy on the same host connects from loopback too; its forwarding header tells
        # its (public) clients apart from the local healthcheck.
        return True
    token = _health_token()
    auth = request.headers.get("Authorization", "")
    if not token or not auth.lower().startswith("bearer "):
        return False
    return hmac.compare_digest(auth[7:].strip().encode(), token.encode())


# What a request cannot be served without (see the module docstring); everything else only degrades.
SERVING_NEEDS = ("database",)


def healthz(request):
    checks = {
        "database": _timed(_database),
        "redis": _timed(_redis),
        "worker": _WorkerPing.get(),
        "embedder": _timed(_embedder),
        "llm": _timed(_llm),
        "followups": _timed(_followups),
        "ingest": _timed(_ingest),
        "recalls": _timed(_recalls),
        "retention": _timed(_retention),
        "cache": _timed(_cache),
    }
    serving = all(checks[name]["status"] == "ok" for name in SERVING_NEEDS)
    degraded = [name for name, c in checks.items() if c["status"] not in ("ok", "disabled")]
    status = "down" if not serving else ("degraded" if degraded else "ok")
    if not _may_see_detail(request):
        checks = {name: {"status": c["status"]} for name, c in checks.items()}
    response = JsonResponse({"status": status, "degraded": degraded, "checks": checks},
                            status=200 if serving else 503)
    response["Cache-Control"] = "no-store"  # a shared cache must not hand the full report to others
    return response
