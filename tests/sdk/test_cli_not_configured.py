"""The CLI with no configuration at all (no flags, no environment, no config file) used to send its
request to the default URL with no key and print ``error: ConnectError: [Errno 111] Connection
refused (http://127.0.0.1:8000)``, which did not say that nothing was configured. It now says so and
points to ``nylon configure``; a URL without a key says the 401 comes from the missing key."""

from __future__ import annotations

import pytest

from .test_cli import nylon
from .test_cli_first_user import _env


@pytest.mark.parametrize("argv", [["health"], ["resonate", "who is on call?"], ["nodes", "list"]])
def test_nothing_configured_says_so_and_points_to_configure(tmp_path, argv):
    out = nylon(*argv, env=_env(tmp_path), stdin="")
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "nylon is not configured" in out.stderr and "nylon configure --url URL --key" in out.stderr
    assert str(tmp_path / "config.json") in out.stderr
    assert "ConnectError" not in out.stderr and out.stdout == ""


def test_weave_with_nothing_configured_sends_nothing(tmp_path):
    out = nylon("weave", "--quiet", env=_env(tmp_path), stdin="Standup: a\n")
    assert out.returncode == 2 and "nylon is not configured" in out.stderr, out.stderr


@pytest.mark.django_db(transaction=True)
def test_a_url_without_a_key_says_the_key_is_missing(nylon_server, world, tmp_path):
    out = nylon("resonate", "anything", env=_env(tmp_path, NYLON_URL=nylon_server.url))
    assert out.returncode == 1 and "401" in out.stderr, out.stderr
    assert "no API key is configured" in out.stderr and "nylon configure --key" in out.stderr
    # health needs no key: it still answers, and says none is configured
    out = nylon("health", env=_env(tmp_path, NYLON_URL=nylon_server.url))
    assert "key: no key configured" in out.stdout and "not configured" not in out.stderr
    # the environment alone is a configuration
    out = nylon("resonate", "anything", env=_env(tmp_path, NYLON_URL=nylon_server.url,
                                                  NYLON_API_KEY=world["a"].key))
    assert out.returncode == 0, out.stderr
