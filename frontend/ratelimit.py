"""Fixed-window counters in the Redis cache for the console's unauthenticated forms (sign-in,
password reset), whose callers have no API key for DRF's throttles to count.

Like the API's throttle (``teams.auth.ActorRateThrottle``) they fail open when Redis is down: a
warning is logged and the form works unthrottled, rather than nobody being able to sign in for the
length of the outage."""

from __future__ import annotations

import hashlib
import logging
import time
import unicodedata

from django.conf import settings
from django.core.cache import cache

log = logging.getLogger("nylon.ratelimit")


def client_ip(request) -> str:
    """The client's address. Behind the TLS proxy (``NYLON_BEHIND_HTTPS_PROXY``) every request comes
    from the proxy, so the last ``X-Forwarded-For`` entry (the one the proxy appended) is the client;
    elsewhere the header is anyone's to forge and only ``REMOTE_ADDR`` counts."""
    if settings.NYLON_BEHIND_HTTPS_PROXY:
        forwarded = [p.strip() for p in request.headers.get("X-Forwarded-For", "").split(",") if p.strip()]
        if forwarded:
            return forwarded[-1]
    return request.META.get("REMOTE_ADDR", "")


def account_ident(typed: str) -> str:
    """The counter's name for a typed account name or email: every spelling the sign-in (or the
    reset) would take for the same account counts as one. Django's ``UsernameField`` NFKC-normalises
    what is typed, so fullwidth 'ｂｅａ' signs in as 'bea'; keyed on the raw text casefolded, it
    had a counter of its own, and every such spelling (fullwidth, ligatures, compatibility forms)
    was another ``NYLON_LOGIN_FAILURES`` guesses. NFKC, casefold, NFKC again (casefolding can undo
    the normal form: Unicode's NFKC_Casefold), then the spaces the form strips."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", typed).casefold()).strip()


def _key(scope: str, ident: str, window: int) -> tuple[str, int]:
    # Hashed: usernames and emails stay out of the cache's key space (and its key length limits).
    digest = hashlib.sha256(ident.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    start = int(time.time()) // window * window
    return f"rl:{scope}:{digest}:{start}", start + window


def retry_after(scope: str, ident: str, *, limit: int, window: int) -> int | None:
    """Seconds until ``ident`` may try again when it used up ``limit`` in the current window, else None."""
    key, end = _key(scope, ident, window)
    try:
        used = cache.get(key, 0)
    except Exception as exc:  # the cache is Redis: down, timed out
        log.warning("%s limit not checked (cache unavailable: %s); allowed", scope, type(exc).__name__)
        return None
    return max(int(end - time.time()), 1) if used >= limit else None


def count(scope: str, ident: str, *, window: int) -> None:
    """One more use by ``ident`` in the current window."""
    key, _ = _key(scope, ident, window)
    try:
        if not cache.add(key, 1, timeout=window + 1):
            cache.incr(key)
    except ValueError:  # expired between add and incr: this use starts the count again
        cache.add(key, 1, timeout=window + 1)
    except Exception as exc:
        log.warning("%s use not counted (cache unavailable: %s)", scope, type(exc).__name__)


def clear(scope: str, ident: str, *, window: int) -> None:
    key, _ = _key(scope, ident, window)
    try:
        cache.delete(key)
    except Exception as exc:
        log.warning("%s count not cleared (cache unavailable: %s)", scope, type(exc).__name__)
