"""NYLON_RATE_LIMIT is checked when settings load. DRF parses a throttle rate only when a request is
throttled, so a malformed one used to start cleanly and then fail every authenticated request with
a 500 while /healthz stayed 200. Settings are read once per process: each configuration is imported
in a subprocess of its own, as in test_deploy_settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rest_framework.throttling import SimpleRateThrottle

from tests.settings_loader import load_settings


def _rates(home: Path, **env: str) -> dict:
    out = load_settings(home, ("REST_FRAMEWORK",), **env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])["REST_FRAMEWORK"]["DEFAULT_THROTTLE_RATES"]


@pytest.mark.parametrize("value", ["abc", "100", "100/", "/min", "ten/min", "100/week", "100/fortnight",
                                   "100/mxyz", "-5/min", "0/min", "1.5/s", "100/min/2"])
def test_a_malformed_rate_refuses_to_start(tmp_path, value):
    out = load_settings(tmp_path, (), NYLON_RATE_LIMIT=value)
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
