"""What an instance keeps in Redis is named after the database it serves (nylon_project/namespace.py):
the same database gives the same names in every process (web, worker and beat; several hosts on
one DATABASE_URL), another database other names, and NYLON_CELERY_QUEUE / NYLON_CACHE_PREFIX /
NYLON_CHANNEL_PREFIX still win when set. Before, every instance used ``nylon`` and ``celery``.
tests/nylon_project/test_instances_share_redis.py runs two real instances on one Redis."""

from __future__ import annotations

import re

import pytest

from tests.settings_loader import load_settings, settings_values

DB = "postgresql://nylon:pw@db.example.invalid:5432/nylon"
FIELDS = ("queue", "cache", "channels", "control", "events", "unacked", "results")


def _names(home, **env) -> dict:
    env = {"NYLON_REDIS_NAMESPACE": "database", **env}  # the derivation; the default is tested below
    out = load_settings(home, ("NYLON_NAMESPACE", "CELERY_TASK_DEFAULT_QUEUE", "CACHES", "CHANNEL_LAYERS",
                               "CELERY_CONTROL_EXCHANGE", "CELERY_EVENT_EXCHANGE", "CELERY_BROKER_TRANSPORT_OPTIONS",
                               "CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS"), **env)
    assert out.returncode == 0, out.stderr[-3000:]
    v = settings_values(out)
    return {
        "namespace": v["NYLON_NAMESPACE"],
        "queue": v["CELERY_TASK_DEFAULT_QUEUE"],
        "cache": v["CACHES"]["default"]["KEY_PREFIX"],
        "channels": v["CHANNEL_LAYERS"]["default"]["CONFIG"]["prefix"],
        "control": v["CELERY_CONTROL_EXCHANGE"] or "celery",
        "events": v["CELERY_EVENT_EXCHANGE"] or "celeryev",
        "unacked": (v["CELERY_BROKER_TRANSPORT_OPTIONS"] or {}).get("unacked_key", "unacked"),
        "results": (v["CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS"] or {}).get("global_keyprefix", ""),
    }


def test_one_database_has_one_namespace_in_every_process(tmp_path):
    first = _names(tmp_path / "one", DATABASE_URL=DB)
    # Another process, data dir and role, the port left to its default, the host in capitals: the
    # same database, so the same names (a worker must consume what the web process sends).
    second = _names(tmp_path / "two", DATABASE_URL="postgresql://reader:other@DB.example.invalid/nylon")
    assert first == second
    ns = first["namespace"]
    assert ns and re.fullmatch(r"[0-9a-f]{10}", ns), first
    for field in FIELDS:
        assert ns in first[field], (field, first)


@pytest.mark.parametrize("other", [
    "postgresql://nylon:pw@db.example.invalid:5432/nylon2",  # another database on the same server
    "postgresql://nylon:pw@db2.example.invalid:5432/nylon",  # the same name on another server
    "postgresql://nylon:pw@db.example.invalid:5433/nylon",  # another server on the same host
], ids=["name", "host", "port"])
def test_another_database_has_other_names_for_everything(tmp_path, other):
    mine, theirs = _names(tmp_path / "a", DATABASE_URL=DB), _names(tmp_path / "b", DATABASE_URL=other)
    for field in ("namespace", *FIELDS):
        assert mine[field] != theirs[field], (field, mine, theirs)


def test_the_embedded_postgres_is_told_apart_by_its_socket_directory(tmp_path):
    """Two ``make run`` with their own NYLON_HOME: both databases are called ``nylon``, each server
    listens in its own data directory."""
    def url(home: str) -> str:
        return f"postgresql://postgres@/nylon?host={home}/pg"

    first = _names(tmp_path / "1", DATABASE_URL=url("/srv/one/.nylon"))
    assert _names(tmp_path / "2", DATABASE_URL=url("/srv/one/.nylon")) == first
    other = _names(tmp_path / "3", DATABASE_URL=url("/srv/two/.nylon"))
    for field in ("namespace", *FIELDS):
        assert first[field] != other[field], (field, first, other)


def test_explicit_names_win_and_the_control_exchange_stays_the_databases(tmp_path):
    derived = _names(tmp_path / "a", DATABASE_URL=DB)
    told = _names(tmp_path / "b", DATABASE_URL=DB, NYLON_CELERY_QUEUE="q-ops", NYLON_CACHE_PREFIX="c-ops",
                  NYLON_CHANNEL_PREFIX="ch-ops")
    assert (told["queue"], told["cache"], told["channels"]) == ("q-ops", "c-ops", "ch-ops")
    # Workers of this database, whatever queue they consume, are the ones its /healthz pings.
    assert told["control"] == derived["control"] and told["namespace"] == derived["namespace"]
    blank = _names(tmp_path / "c", DATABASE_URL=DB, NYLON_CELERY_QUEUE="", NYLON_CACHE_PREFIX=" ",
                   NYLON_CHANNEL_PREFIX="")  # compose's ${NAME:-}: the default
    assert blank == derived


def _state_keys() -> tuple[str, str, str]:
    from memory import embedding
    from nylon_project import retention
    from reflection import llm

    return llm._state_key("global", "probe"), embedding._states_key()[0], retention._last_run_key()


def test_state_keys_are_the_instances(monkeypatch, settings):
    """The LLM state, the embedders' states and retention's last run. Two embedded servers, each
    with a database ``nylon`` on one Redis, have two namespaces: keyed by the name alone, one read
    the other's LLM state."""
    from django.db import connection

    keys = []
    for host, ns in (("/srv/one/.nylon/pg", "1111111111"), ("/srv/two/.nylon/pg", "2222222222")):
        monkeypatch.setitem(connection.settings_dict, "HOST", host)
        settings.NYLON_NAMESPACE = ns
        keys.append(_state_keys())
    for mine, theirs in zip(*keys, strict=True):
        assert mine != theirs, (mine, theirs)


def test_state_keys_meet_when_processes_spell_the_database_two_ways(monkeypatch, settings):
    """The operator's Redis with no namespace (the names of before): web through a pooler, workers
    direct. Workers write the LLM and retention state that web's /healthz reads, so the keys must
    not depend on the host or port (they did: a failing LLM stayed 'not probed yet' on /healthz)."""
    from django.db import connection

    settings.NYLON_NAMESPACE = ""
    keys = []
    for host, port in (("pgbouncer", "6432"), ("db", "5432")):
        monkeypatch.setitem(connection.settings_dict, "HOST", host)
        monkeypatch.setitem(connection.settings_dict, "PORT", port)
        keys.append(_state_keys())
    assert keys[0] == keys[1]
    monkeypatch.setitem(connection.settings_dict, "NAME", "other")  # another database: other state
    assert all(a != b for a, b in zip(keys[0], _state_keys(), strict=True))


@pytest.mark.django_db
def test_the_test_process_uses_the_names_the_processes_it_starts_derive(tmp_path):
    """Tests start web processes and workers on the test database (live_env): this process must
    ping them and read their cache entries under the same names (conftest's namespace.adopt)."""
    from django.conf import settings

    from nylon_project import namespace
    from nylon_project.celery import app
    from nylon_project.live import live_env

    child = _names(tmp_path, DATABASE_URL=live_env()["DATABASE_URL"])
    assert settings.NYLON_NAMESPACE == child["namespace"] == namespace.current()
    assert app.conf.control_exchange == child["control"]
    assert app.conf.event_exchange == child["events"]
    assert settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] == child["channels"]
    assert settings.CACHES["default"]["KEY_PREFIX"] == child["cache"]
    assert app.conf.result_backend_transport_options["global_keyprefix"] == child["results"]


def test_a_redis_nylon_picked_is_shared_by_database_an_operators_keeps_the_old_names(tmp_path):
    """The namespace is the database's when Nylon picked the Redis (the one on 6379 that another
    ``make run`` may have picked too); with the operator's REDIS_URL the names of before stay, so an
    upgrade finds the tasks already queued, and processes that spell one database two ways (through
    a pooler, by another host name) still meet. NYLON_REDIS_NAMESPACE chooses either, or a name."""
    picked = _names(tmp_path / "a", DATABASE_URL=DB, NYLON_REDIS_NAMESPACE="", NYLON_EMBEDDED_REDIS="1")
    assert picked == _names(tmp_path / "b", DATABASE_URL=DB)  # the database's names
    given = _names(tmp_path / "c", DATABASE_URL=DB, NYLON_REDIS_NAMESPACE="")
    assert given == {"namespace": "", "queue": "nylon", "cache": "nylon", "channels": "nylon", "control": "celery",
                     "events": "celeryev", "unacked": "unacked", "results": ""}
    assert _names(tmp_path / "d", DATABASE_URL=DB, NYLON_REDIS_NAMESPACE="none", NYLON_EMBEDDED_REDIS="1") == given
    named = _names(tmp_path / "e", DATABASE_URL=DB, NYLON_REDIS_NAMESPACE="staging-eu")
    assert named["namespace"] == "staging-eu" and named["queue"] == named["control"] == "nylon-staging-eu"
    bad = load_settings(tmp_path / "f", ("NYLON_NAMESPACE",), DATABASE_URL=DB, NYLON_REDIS_NAMESPACE="Not OK!")
    assert bad.returncode != 0 and "NYLON_REDIS_NAMESPACE" in bad.stderr
