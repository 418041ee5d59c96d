"""NYLON_RATE_LIMIT is checked when settings load. DRF parses a throttle rate only when a request is
throttled, so a malformed one used to start cleanly and then fail every authenticated request with
a 500 while /healthz stayed 200. Settings are read once per process: each configuration is imported
in a subprocess of its own, as in test_deploy_settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rest_framework.throttling import SimpleRateThrottle

ROOT = Path(__file__).resolve().parents[2]


def _load(home: Path, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("NYLON_", "CELERY_")) and k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    env = {**base, "DATABASE_URL": "postgresql://nylon:pw@db.example.invalid:5432/nylon",
           "REDIS_URL": "redis://redis.example.invalid:6379/0", "NYLON_HOME": str(home), "NYLON_DB_POOL": "0",
           "NYLON_SECRET_KEY": "k" * 50, **env}
    code = ("import json, nylon_project.settings as s; "
            "print(json.dumps(s.REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']))")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def _rates(home: Path, **env: str) -> dict:
    out = _load(home, **env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("value", ["abc", "100", "100/", "/min", "ten/min", "100/week", "100/fortnight",
                                   "100/mxyz", "-5/min", "0/min", "1.5/s", "100/min/2"])
def test_a_malformed_rate_refuses_to_start(tmp_path, value):
    out = _load(tmp_path, NYLON_RATE_LIMIT=value)
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert "ImproperlyConfigured" in last and "NYLON_RATE_LIMIT" in last and repr(value) in last
    assert "<requests>/<period>" in last and "6000/min" in last


@pytest.mark.parametrize(("value", "expected"), [
    ("5/min", (5, 60)), ("5/m", (5, 60)), ("5/minute", (5, 60)), (" 7 / SEC ", (7, 1)), ("7/s", (7, 1)),
    ("7/second", (7, 1)), ("100/Hour", (100, 3600)), ("100/h", (100, 3600)), ("2/DAY", (2, 86400)),
    ("2/d", (2, 86400)),
])
def test_accepted_rates_are_what_drf_parses(tmp_path, value, expected):
    rate = _rates(tmp_path, NYLON_RATE_LIMIT=value)["actor"]
    # the value DRF gets must parse to the same budget (DRF itself is case-sensitive: "5/MIN" fails there)
    assert SimpleRateThrottle.parse_rate(None, rate) == expected


def test_unset_or_blank_means_the_default(tmp_path):
    # docker-compose passes ${NYLON_RATE_LIMIT:-}: blank means the default, not a crash
    assert _rates(tmp_path) == {"actor": "6000/min"}
    assert _rates(tmp_path, NYLON_RATE_LIMIT="  ") == {"actor": "6000/min"}


def test_every_throttle_rate_is_one_drf_parses(tmp_path):
    # any throttle scope added later goes through the same check or this fails
    for rate in _rates(tmp_path).values():
        assert SimpleRateThrottle.parse_rate(None, rate)[0] >= 1
