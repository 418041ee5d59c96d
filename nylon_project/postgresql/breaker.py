"""A circuit breaker in front of the psycopg pool: a Postgres outage is reported in about a second.

psycopg-pool never hands a connect error to the caller: while the server is down, ``getconn``
waits the pool's whole timeout (``NYLON_DB_POOL_TIMEOUT``) for a connection that cannot come, and
only then does the request answer its 503. The pool's connection class (``BreakerConnection``)
tells the breaker of its server whether each connect found the server there. While the last
"unreachable" is younger than the window (``NYLON_DB_BREAKER_SECS``) and the pool has no idle
connection, a request fails at once with the same retryable error. Once a window has passed, one
request probes the server with a connection of its own (the others keep failing fast), so a
restart is noticed within a window instead of after the pool's reconnect back-off.

A pool that is merely busy (every connection lent out, the server answering) never trips it:
there a connection comes back soon, and waiting for it is right."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Self

import psycopg
from psycopg.conninfo import conninfo_to_dict

from ..env import env_float

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

# libpq's words for "nobody answered" (refused, no socket file, timed out, dropped, no such host) and
# the server's own "not now" while it stops or starts. Too many clients or a bad password are
# answers from a running server: those keep the pool's normal wait.
_UNREACHABLE = (
    "connection refused", "no such file or directory", "is the server running", "timeout expired",
    "server closed the connection", "could not translate host name", "network is unreachable",
    "no route to host", "the database system is",
)

PASS, PROBE, FAIL = "pass", "probe", "fail"


def breaker_window() -> float:
    return env_float("NYLON_DB_BREAKER_SECS", 2.0)


class DatabaseUnreachable(psycopg.OperationalError):
    """Raised instead of waiting for the pool. A psycopg OperationalError, so Django wraps it into
    its own and the API answers the usual 503 with Retry-After (``nylon_project.errors``)."""


def is_unreachable(exc: BaseException) -> bool:
    # Connect errors carry no SQLSTATE in psycopg (even when the server sent one), so the message it is.
    return isinstance(exc, psycopg.OperationalError) and any(w in str(exc).lower() for w in _UNREACHABLE)


class Breaker:
    """The state of one server: when it was last found unreachable (None: reachable)."""

    def __init__(self, window: float, clock: Callable[[], float] = time.monotonic):
        self.window = window
        self._clock = clock
        self._lock = threading.Lock()
        self.failed_at: float | None = None

    def record(self, *, reachable: bool) -> None:
        with self._lock:
            self.failed_at = None if reachable else self._clock()

    def admit(self, *, idle: int) -> str:
        """PASS: wait for the pool as usual; PROBE: try the server first; FAIL: answer at once."""
        with self._lock:
            if self.failed_at is None or idle > 0:
                return PASS
            now = self._clock()
            if now - self.failed_at < self.window:
                return FAIL
            # This request probes; restarting the window keeps the others failing fast meanwhile.
            self.failed_at = now
            return PROBE

    def age(self) -> float:
        failed_at = self.failed_at
        return 0.0 if failed_at is None else self._clock() - failed_at


_breakers: dict[tuple[str, str], Breaker] = {}
_breakers_lock = threading.Lock()


def breaker_for(conninfo: str, kwargs: dict[str, Any]) -> Breaker:
    """One breaker per server (host, port) and process, whichever database or pool asks."""
    params = {**conninfo_to_dict(conninfo), **kwargs}
    server = (str(params.get("host") or ""), str(params.get("port") or ""))
    with _breakers_lock:
        if server not in _breakers:
            _breakers[server] = Breaker(breaker_window())
        return _breakers[server]


class BreakerConnection(psycopg.Connection):
    """The pool's connection class (its ``connection_class`` option): every connect, the pool's
    own in the background and the breaker's probes, reports whether the server was there."""

    @classmethod
    def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
        breaker = breaker_for(conninfo, kwargs)
        try:
            conn = super().connect(conninfo, **kwargs)
        except psycopg.OperationalError as exc:
            breaker.record(reachable=not is_unreachable(exc))
            raise
        breaker.record(reachable=True)
        return conn


def guard(pool: ConnectionPool) -> None:
    """Before ``pool.getconn()``: return to wait for the pool as usual, or raise DatabaseUnreachable."""
    if not issubclass(pool.connection_class, BreakerConnection):
        return
    breaker = breaker_for(pool.conninfo, pool.kwargs or {})
    if breaker.failed_at is None:
        return  # the common case, without the pool's lock
    verdict = breaker.admit(idle=pool.get_stats().get("pool_available", 0))
    if verdict == PASS:
        return
    if verdict == PROBE:
        try:
            # A short connect of our own: the pool's next attempt may be a back-off away.
            pool.connection_class.connect(pool.conninfo, **{**(pool.kwargs or {}), "connect_timeout": 2}).close()
            return  # the server is back (or answered): getconn finds it at once
        except psycopg.OperationalError as exc:
            if not is_unreachable(exc):
                return  # a running server that refused this one (e.g. too many clients): the pool decides
            raise DatabaseUnreachable(f"database server unreachable: {str(exc).splitlines()[0]}") from exc
    raise DatabaseUnreachable(
        f"database server unreachable (last tried {breaker.age():.1f} s ago); not waiting for the pool")
