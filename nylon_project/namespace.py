"""The namespace of the database an instance serves: everything it keeps in Redis is named after it.

Instances on different databases may share one Redis: ``embedded.redis_url()`` takes a Redis on
127.0.0.1:6379 whenever one listens (a second ``make run`` with ``NYLON_HOME=<dir>`` finds the same
one), and ``REDIS_URL`` may name a shared server. When every instance used the queue ``nylon``,
Celery's control exchange ``celery`` and the cache and channel prefix ``nylon``, a task one instance
sent ran on another's worker against the other's database (node and key ids of another database),
each /healthz counted the other's workers as its own (a dead worker looked healthy), and LLM and
embedder state, rate-limit counters and the live feed's groups were shared.

So where Nylon picked the Redis (``chosen``), the default name of each (queue, control and event
exchanges, unacknowledged-message keys, result keys, cache prefix, channel prefix; ``redis_names``)
is ``nylon-<digest>``, the digest of the database's identity: its host (for the embedded Postgres the socket directory, its data directory
or pgserver's runtime directory named after it), its port and its name. Every process of one
database derives the same one (web, worker and beat of a ``make run``; several hosts on one
``DATABASE_URL``, docs/scaling.md), and a process on another database a different one.
``NYLON_CELERY_QUEUE``, ``NYLON_CACHE_PREFIX`` and ``NYLON_CHANNEL_PREFIX`` still win when set.
A Redis the operator named (``REDIS_URL``) keeps the names of before unless ``NYLON_REDIS_NAMESPACE``
asks for the database's or a name: an upgrade must find the tasks already queued under them, and a
deployment's processes may spell one database differently (a pooler for web, a direct host for
workers), which would give them two namespaces.

Not part of the identity: the user and password (one database reached as another role is the same
instance) and anything a proxy in between changes. Hosts must name the database the same way:
``db.internal`` and ``10.0.0.5`` are two identities (or set the three names explicitly, alike).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import os
import re

DIGEST_CHARS = 10  # 40 bits: a collision between two databases on one Redis is not a concern
DEFAULT_PORT = "5432"


def identity(db: dict) -> str:
    """``host:port/name`` of a Django DATABASES entry, spelled the same by every process."""
    host = (db.get("HOST") or "").strip()
    # A socket directory (the embedded server) as a normal path; a host name in any case is one host.
    host = os.path.normpath(host) if host.startswith("/") else host.lower()
    port = str(db.get("PORT") or "").strip() or DEFAULT_PORT
    return f"{host}:{port}/{db.get('NAME') or ''}"


def of(db: dict) -> str:
    """The namespace (a short hex digest) of a Django DATABASES entry."""
    return _digest(identity(db))


@functools.lru_cache(maxsize=64)
def _digest(text: str) -> str:  # state keys ask for it on every read and write
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


def current() -> str:
    """The namespace of the database this process is connected to now. Under pytest that is the test
    database (Django renames the connection's NAME when it creates it), which the processes a test
    starts are given (``live.live_env``): state keys (LLM, embedders, retention) use this one."""
    from django.db import connection

    return of(connection.settings_dict)


def state_scope() -> str:
    """What the state keys of an instance (LLM, embedders, retention's last run) are named after: its
    namespace where one is in effect (``settings.NYLON_NAMESPACE``: two embedded servers, each with a
    database ``nylon`` on the same Redis, keep apart), else the database's name. Not ``current()``:
    with the operator's Redis and no namespace, web may reach the database through a pooler and the
    workers directly, and the workers' LLM and retention state must be what web's /healthz reads."""
    from django.conf import settings
    from django.db import connection

    return settings.NYLON_NAMESPACE or f"db:{connection.settings_dict.get('NAME') or ''}"


# The names every instance used before namespaces (``redis_names("")``): what an operator's own Redis
# keeps serving unless NYLON_REDIS_NAMESPACE says otherwise, so an upgrade finds its queued tasks.
_UNNAMED = {"queue": "nylon", "cache_prefix": "nylon", "channel_prefix": "nylon", "control_exchange": "celery",
            "event_exchange": "celeryev", "unacked_key": "unacked", "unacked_index_key": "unacked_index",
            "unacked_mutex_key": "unacked_mutex", "result_keyprefix": ""}
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")


def chosen(db: dict, *, setting: str, redis_was_picked: bool) -> str:
    """The namespace of an instance: ``NYLON_REDIS_NAMESPACE`` when set (``database``: this digest;
    ``none``: the names of before; another word: that name), else the database's digest when the
    Redis was picked for it (``embedded.redis_url``: the one on 6379, which another instance may have
    picked too) and none when the operator named it (``REDIS_URL``: their choice, and their tasks
    already queued under the old names)."""
    value = setting.strip().lower()
    if value == "database" or (not value and redis_was_picked):
        return of(db)
    if value in ("", "none"):
        return ""
    if not _NAME.fullmatch(value):
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"NYLON_REDIS_NAMESPACE: {setting!r} is not database, none or a name of "
                                   "lower-case letters, digits and dashes (at most 40)")
    return value


def redis_names(ns: str) -> dict[str, str]:
    """What an instance with namespace ``ns`` calls its things in Redis, unless set explicitly
    (``""``: the names of before namespaces)."""
    if not ns:
        return dict(_UNNAMED)
    own = f"nylon-{ns}"
    return {
        "queue": own,  # the Celery queue (a Redis list of that name) and its binding
        "cache_prefix": own,  # Django's cache: rate limits, LLM/embedder state, proxy stats, retention
        "channel_prefix": own,  # the live feed's channel layer: groups and channels
        # ping/inspect/broadcast go to "<own>.pidbox" (a Redis pub/sub channel), replies to
        # "reply.<own>.pidbox": /healthz reaches only this database's workers. Worker events
        # (heartbeats, gossip) likewise.
        "control_exchange": own,
        "event_exchange": f"{own}.events",
        # kombu's bookkeeping of delivered, unacknowledged messages (a worker restores the ones
        # older than the visibility timeout): per instance, as each has its own timeout.
        "unacked_key": f"{own}.unacked",
        "unacked_index_key": f"{own}.unacked_index",
        "unacked_mutex_key": f"{own}.unacked_mutex",
        "result_keyprefix": f"{own}:",  # task results, for the few senders that ask for one
    }


def adopt(db: dict) -> str:
    """Switch this process to the namespace of ``db`` after its settings were read with another.

    For pytest: the settings are read with the database of ``DATABASE_URL``, and then the test
    database is created and used, by this process and by every process a test starts (they are
    given its URL and derive its namespace themselves). Without this, a test could not ping the
    workers it started (another control exchange) nor read what they put in the cache. Names set
    explicitly (``NYLON_CACHE_PREFIX`` …) are kept. Returns the new namespace.
    """
    from django.conf import settings
    from django.test.utils import override_settings

    from .celery import app

    ns = of(db)
    old, new = redis_names(settings.NYLON_NAMESPACE), redis_names(ns)

    def moved(value: str, what: str) -> str:
        return new[what] if value == old[what] else value

    caches = copy.deepcopy(settings.CACHES)
    caches["default"]["KEY_PREFIX"] = moved(caches["default"]["KEY_PREFIX"], "cache_prefix")
    layers = copy.deepcopy(settings.CHANNEL_LAYERS)
    layers["default"]["CONFIG"]["prefix"] = moved(layers["default"]["CONFIG"]["prefix"], "channel_prefix")
    celery = celery_settings(new, queue=moved(settings.CELERY_TASK_DEFAULT_QUEUE, "queue"),
                             transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS)
    # Django's caches and the channel layers are rebuilt on setting_changed (the test signals).
    override_settings(NYLON_NAMESPACE=ns, CACHES=caches, CHANNEL_LAYERS=layers, **celery).enable()
    app.conf.update({name.removeprefix("CELERY_").lower(): value for name, value in celery.items()})
    for built in ("control", "events"):  # made with the old exchanges' names
        app.__dict__.pop(built, None)
    return ns


def celery_settings(names: dict[str, str], *, queue: str, transport_options: dict) -> dict:
    """The CELERY_* settings that carry the namespace (settings.py and ``adopt`` alike)."""
    return {
        "CELERY_TASK_DEFAULT_QUEUE": queue,
        "CELERY_CONTROL_EXCHANGE": names["control_exchange"],
        "CELERY_EVENT_EXCHANGE": names["event_exchange"],
        "CELERY_BROKER_TRANSPORT_OPTIONS": {
            **transport_options,
            **{k: names[k] for k in ("unacked_key", "unacked_index_key", "unacked_mutex_key")},
        },
        "CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS": {"global_keyprefix": names["result_keyprefix"]},
    }
