"""Deployment settings: behind an HTTPS proxy, a real hostname, the secret key. Settings are read
once per process, so each configuration is imported in a subprocess of its own; what a request
then does with those values is checked in-process with override_settings."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.test import Client, override_settings

ROOT = Path(__file__).resolve().parents[2]
REMOTE_DB = "postgresql://nylon:pw@db.example.invalid:5432/nylon"
EMBEDDED_DB = "postgresql://postgres@/nylon?host=/tmp/nylon-pg-socket"  # the form embedded.py exports
NAMES = ["DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "SECURE_PROXY_SSL_HEADER",
         "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_HSTS_SECONDS"]
OLD_DEV_KEY = "nylon-insecure-local-development-key-change-me"


def _env(home: Path, **env: str) -> dict[str, str]:
    """A clean environment: nothing of this test process's Nylon configuration leaks in, and no
    embedded Postgres or Redis is started (both URLs are given; nothing connects on import)."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("NYLON_", "CELERY_")) and k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    return {**base, "DATABASE_URL": REMOTE_DB, "REDIS_URL": "redis://redis.example.invalid:6379/0",
            "NYLON_HOME": str(home), "NYLON_DB_POOL": "0", **env}


def _start(home: Path, **env: str) -> subprocess.Popen:
    code = ("import json, nylon_project.settings as s; "
            f"print(json.dumps({{n: getattr(s, n, None) for n in {NAMES!r}}}))")
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=_env(home, **env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _settings(home: Path, **env: str) -> dict:
    proc = _start(home, **env)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def _overrides(values: dict) -> dict:
    out = {k: values[k] for k in ("ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS")}
    if values["SECURE_PROXY_SSL_HEADER"]:
        out["SECURE_PROXY_SSL_HEADER"] = tuple(values["SECURE_PROXY_SSL_HEADER"])
    for name in ("SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_HSTS_SECONDS"):
        if values[name] is not None:
            out[name] = values[name]
    return out


def _compose_web() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["web"]


# --- behind an HTTPS reverse proxy -------------------------------------------------------------


def test_https_proxy_settings_from_the_environment(tmp_path):
    values = _settings(tmp_path, NYLON_SECRET_KEY="k" * 50, NYLON_BEHIND_HTTPS_PROXY="1", NYLON_HSTS_SECONDS="600",
                       NYLON_CSRF_TRUSTED_ORIGINS=" https://nylon.example.com, https://console.example.com ,")
    assert values["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert values["SESSION_COOKIE_SECURE"] is True and values["CSRF_COOKIE_SECURE"] is True
    assert values["SECURE_HSTS_SECONDS"] == 600
    assert values["CSRF_TRUSTED_ORIGINS"] == ["https://nylon.example.com", "https://console.example.com"]
    assert _settings(tmp_path, NYLON_SECRET_KEY="k" * 50, NYLON_BEHIND_HTTPS_PROXY="1")["SECURE_HSTS_SECONDS"] == 3600


def test_plain_http_by_default(tmp_path):
    # `make run` and the compose port serve plain http: Secure cookies would never come back there
    values = _settings(tmp_path, NYLON_SECRET_KEY="k" * 50)
    assert values["SECURE_PROXY_SSL_HEADER"] is None and values["CSRF_TRUSTED_ORIGINS"] == []
    assert not values["SESSION_COOKIE_SECURE"] and not values["CSRF_COOKIE_SECURE"] and not values["SECURE_HSTS_SECONDS"]


def test_trusted_origin_without_scheme_is_refused(tmp_path):
    proc = _start(tmp_path, NYLON_SECRET_KEY="k" * 50, NYLON_CSRF_TRUSTED_ORIGINS="nylon.example.com")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "ImproperlyConfigured" in err and "https://nylon.example.com" in err


def test_compose_passes_the_proxy_settings_through():
    env = _compose_web()["environment"]
    assert env["NYLON_CSRF_TRUSTED_ORIGINS"] == "${NYLON_CSRF_TRUSTED_ORIGINS:-}"
    assert env["NYLON_BEHIND_HTTPS_PROXY"] == "${NYLON_BEHIND_HTTPS_PROXY:-0}"
    assert env["NYLON_HSTS_SECONDS"].startswith("${NYLON_HSTS_SECONDS:-")


def _login_through_proxy(user, *, host: str, origin: str) -> object:
    client = Client(enforce_csrf_checks=True)
    proxy = {"HTTP_HOST": host, "HTTP_X_FORWARDED_PROTO": "https"}
    assert client.get("/login/", **proxy).status_code == 200
    return client.post("/login/", {"username": user.username, "password": "pw-proxy-123",
                                   "csrfmiddlewaretoken": client.cookies["csrftoken"].value},
                       HTTP_ORIGIN=origin, HTTP_REFERER=f"{origin}/login/", **proxy)


@pytest.mark.django_db
def test_console_login_behind_an_https_proxy(tmp_path, django_user_model):
    user = django_user_model.objects.create_user("proxied", "p@example.com", "pw-proxy-123")
    values = _settings(tmp_path, NYLON_SECRET_KEY="k" * 50, NYLON_BEHIND_HTTPS_PROXY="1",
                       NYLON_ALLOWED_HOSTS="nylon.example.com,web")
    # the proxy keeps the Host header: https://nylon.example.com is the request's own origin
    with override_settings(**_overrides(values)):
        r = _login_through_proxy(user, host="nylon.example.com", origin="https://nylon.example.com")
    assert r.status_code == 302, r.content[:500]
    assert r.cookies["sessionid"]["secure"] and r.cookies["csrftoken"]["secure"]
    assert r.headers["Strict-Transport-Security"] == "max-age=3600"
    # the proxy rewrites Host to the upstream's name: the public origin has to be trusted
    values = _settings(tmp_path, NYLON_SECRET_KEY="k" * 50, NYLON_BEHIND_HTTPS_PROXY="1",
                       NYLON_ALLOWED_HOSTS="nylon.example.com,web",
                       NYLON_CSRF_TRUSTED_ORIGINS="https://nylon.example.com")
    with override_settings(**_overrides(values)):
        assert _login_through_proxy(user, host="web:8000", origin="https://nylon.example.com").status_code == 302


@pytest.mark.django_db
def test_without_the_proxy_setting_the_https_login_is_refused(tmp_path, django_user_model):
    # what operators saw: Origin https://host against an expected http://host, 403 on the login
    user = django_user_model.objects.create_user("proxied", "p@example.com", "pw-proxy-123")
    values = _settings(tmp_path, NYLON_SECRET_KEY="k" * 50, NYLON_ALLOWED_HOSTS="nylon.example.com")
    with override_settings(**_overrides(values)):
        assert _login_through_proxy(user, host="nylon.example.com", origin="https://nylon.example.com").status_code == 403


# --- the compose healthcheck with a real hostname ----------------------------------------------


@pytest.mark.django_db
def test_healthcheck_host_is_allowed_whatever_the_hostname(tmp_path):
    test = " ".join(_compose_web()["healthcheck"]["test"])
    url_host = re.search(r"https?://([^/'\"]+)/healthz", test).group(1)
    values = _settings(tmp_path, NYLON_SECRET_KEY="k" * 50, NYLON_ALLOWED_HOSTS="nylon.example.com")
    assert values["ALLOWED_HOSTS"][0] == "nylon.example.com"
    assert {"127.0.0.1", "localhost", "[::1]"} <= set(values["ALLOWED_HOSTS"])
    assert "testserver" not in values["ALLOWED_HOSTS"]  # only loopback is added
    with override_settings(ALLOWED_HOSTS=values["ALLOWED_HOSTS"]):
        r = Client().get("/healthz", HTTP_HOST=url_host)
        assert r.status_code != 400 and "database" in r.json()["checks"]  # 503 here: no worker runs
        assert Client().get("/healthz", HTTP_HOST="evil.example.com").status_code == 400


# --- the secret key ----------------------------------------------------------------------------


def test_production_without_a_secret_key_refuses_to_start(tmp_path):
    proc = _start(tmp_path)  # DEBUG off, a database on another machine
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert "ImproperlyConfigured" in err and "NYLON_SECRET_KEY is not set" in err
    assert not (tmp_path / "secret_key").exists()


def test_the_secret_key_from_the_environment_is_used(tmp_path):
    assert _settings(tmp_path, NYLON_SECRET_KEY="s3cret" * 10)["SECRET_KEY"] == "s3cret" * 10
    assert not (tmp_path / "secret_key").exists()


@pytest.mark.parametrize("env", [{"DATABASE_URL": EMBEDDED_DB},  # `make run`, `make test`
                                 {"DATABASE_URL": "postgresql://nylon@127.0.0.1:5432/nylon"},
                                 {"NYLON_DEBUG": "1"}], ids=["embedded", "loopback", "debug"])
def test_local_runs_get_a_random_key_kept_in_nylon_home(tmp_path, env):
    first = _settings(tmp_path, **env)["SECRET_KEY"]
    path = tmp_path / "secret_key"
    assert first != OLD_DEV_KEY and len(first) >= 50 and path.read_text().strip() == first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert _settings(tmp_path, **env)["SECRET_KEY"] == first  # kept: sessions survive a restart
    assert _settings(tmp_path / "other", **env)["SECRET_KEY"] != first  # random, not a constant


def test_processes_starting_together_agree_on_one_key(tmp_path):
    # web, worker and beat of `make run` start at once on a fresh clone
    procs = [_start(tmp_path, DATABASE_URL=EMBEDDED_DB) for _ in range(4)]
    keys = set()
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
        keys.add(json.loads(out.strip().splitlines()[-1])["SECRET_KEY"])
    assert len(keys) == 1 and keys == {(tmp_path / "secret_key").read_text().strip()}
    assert [p.name for p in tmp_path.iterdir()] == ["secret_key"]  # no temporary files left


def test_blank_values_mean_the_defaults(tmp_path):
    """docker-compose passes ``${NAME:-}`` as an empty string for what the operator left out: that
    must mean the default, not a crash (int("")) nor a silent "off" (TLS)."""
    code = ("import json, nylon_project.settings as s; print(json.dumps({n: getattr(s, n) for n in "
            "('EMAIL_PORT', 'EMAIL_USE_TLS', 'EMAIL_USE_SSL', 'DEFAULT_FROM_EMAIL', 'NYLON_INVITES_PER_HOUR', "
            "'NYLON_INVITE_TTL_DAYS', 'SECURE_HSTS_SECONDS')}))")
    blank = {name: "" for name in ("NYLON_EMAIL_PORT", "NYLON_EMAIL_TLS", "NYLON_EMAIL_SSL", "NYLON_EMAIL_FROM",
                                   "NYLON_INVITES_PER_HOUR", "NYLON_INVITE_TTL_DAYS", "NYLON_HSTS_SECONDS")}
    env = _env(tmp_path, NYLON_SECRET_KEY="k" * 50, NYLON_PUBLIC_URL="https://nylon.example.com",
               NYLON_EMAIL_HOST="smtp.example.com", NYLON_BEHIND_HTTPS_PROXY="1", **blank)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    values = json.loads(out.stdout.strip().splitlines()[-1])
    assert values == {"EMAIL_PORT": 587, "EMAIL_USE_TLS": True, "EMAIL_USE_SSL": False,
                      "DEFAULT_FROM_EMAIL": "nylon@localhost", "NYLON_INVITES_PER_HOUR": 100,
                      "NYLON_INVITE_TTL_DAYS": 7, "SECURE_HSTS_SECONDS": 3600}


def test_compose_passes_the_invitation_settings_through():
    env = _compose_web()["environment"]
    for name in ("NYLON_PUBLIC_URL", "NYLON_EMAIL_HOST", "NYLON_EMAIL_PORT", "NYLON_EMAIL_USER",
                 "NYLON_EMAIL_PASSWORD", "NYLON_EMAIL_TLS", "NYLON_EMAIL_SSL", "NYLON_EMAIL_FROM"):
        assert env[name] == f"${{{name}:-}}", name

