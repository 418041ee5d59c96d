"""Per-agent proxy measurements in Redis (shared by every web process):

- requests (those the upstream failed, answered 502, too: ``upstream_failed``), injected / passed
  through unmodified, and of those passed through, why the memory was
  skipped: ``busy`` (no build slot free, none started), ``over_budget`` (the budget ran out: the
  build given up at it, its thread running on, or none started with no time left),
- tokens injected (approximate: characters / 4),
- prefix stability: how often the stable prefix hash differed from the previous turn's,
- proxy overhead (the time Nylon adds before the request leaves for the upstream): the last
  ``SAMPLES`` values, from which p50 / p95 are read.
Recording runs off the request path (an executor thread); a Redis failure loses a sample, never a
request."""

from __future__ import annotations

import logging
import math

import redis
from django.conf import settings

log = logging.getLogger("nylon.proxy")
SAMPLES = 1000
_client: redis.Redis | None = None


def _redis() -> redis.Redis:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
    return _client


def _key(org_id: int, agent_id: int, part: str) -> str:
    prefix = settings.CACHES["default"].get("KEY_PREFIX", "nylon")
    return f"{prefix}:proxy:{org_id}:{agent_id}:{part}"


SKIP_REASONS = ("busy", "over_budget")


def record(*, org_id: int, agent_id: int, injected: bool, tokens: int, stable_hash: str | None,
           overhead_ms: float, skipped: str | None = None, upstream_failed: bool = False) -> None:
    try:
        r = _redis()
        counts = _key(org_id, agent_id, "counts")
        previous = r.set(_key(org_id, agent_id, "prefix"), stable_hash, get=True) if stable_hash else None
        pipe = r.pipeline(transaction=False)
        pipe.hincrby(counts, "requests", 1)
        pipe.hincrby(counts, "injected" if injected else "passthrough", 1)
        pipe.hincrby(counts, "tokens_injected", tokens)
        if upstream_failed:
            pipe.hincrby(counts, "upstream_failed", 1)
        if skipped in SKIP_REASONS:
            pipe.hincrby(counts, f"skipped_{skipped}", 1)
        if stable_hash and previous is not None:
            pipe.hincrby(counts, "prefix_compared", 1)
            if previous.decode() != stable_hash:
                pipe.hincrby(counts, "prefix_changes", 1)
        samples = _key(org_id, agent_id, "overhead")
        pipe.lpush(samples, round(overhead_ms, 3))
        pipe.ltrim(samples, 0, SAMPLES - 1)
        pipe.sadd(f"{settings.CACHES['default'].get('KEY_PREFIX', 'nylon')}:proxy:{org_id}:agents", agent_id)
        pipe.execute()
    except Exception as exc:  # measurement must never break the proxy
        log.warning("proxy stats not recorded: %s", type(exc).__name__)


def _percentile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    idx = max(0, math.ceil(q * len(sorted_values)) - 1)
    return round(sorted_values[idx], 2)


def agent_ids(org_id: int) -> list[int]:
    members = _redis().smembers(f"{settings.CACHES['default'].get('KEY_PREFIX', 'nylon')}:proxy:{org_id}:agents")
    return sorted(int(m) for m in members)


def read(org_id: int, agent_id: int) -> dict:
    r = _redis()
    raw = {k.decode(): int(v) for k, v in r.hgetall(_key(org_id, agent_id, "counts")).items()}
    samples = sorted(float(x) for x in r.lrange(_key(org_id, agent_id, "overhead"), 0, -1))
    requests, injected = raw.get("requests", 0), raw.get("injected", 0)
    compared, changes = raw.get("prefix_compared", 0), raw.get("prefix_changes", 0)
    return {
        "requests": requests,
        "injected": injected,
        "passthrough": raw.get("passthrough", 0),
        "upstream_failed": raw.get("upstream_failed", 0),  # answered 502 upstream_unavailable
        "memory_skipped": {reason: raw.get(f"skipped_{reason}", 0) for reason in SKIP_REASONS},
        "tokens_injected": {"total": raw.get("tokens_injected", 0),
                            "per_injected_request": round(raw.get("tokens_injected", 0) / injected, 1)
                            if injected else 0},
        "prefix": {"turns_compared": compared, "changes": changes,
                   "stability": round(1 - changes / compared, 4) if compared else None},
        "overhead_ms": {"p50": _percentile(samples, 0.5), "p95": _percentile(samples, 0.95),
                        "samples": len(samples)},
    }
