"""``--url``/``--key`` work before and after the command: the README's own example,
``nylon configure --url … --key …``, was refused with "unrecognized arguments"."""

from __future__ import annotations

import json

import pytest

from .test_cli import nylon


def test_configure_takes_its_flags_after_the_command(tmp_path):
    cfg = tmp_path / "config.json"
    env = {"NYLON_CONFIG": str(cfg), "NYLON_URL": "", "NYLON_API_KEY": ""}
    # --no-check: no server at that address to check the key with
    out = nylon("configure", "--url", "http://nylon.example:8000", "--key", "nyl_abc_def", "--no-check", env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(cfg.read_text()) == {"url": "http://nylon.example:8000", "api_key": "nyl_abc_def"}
    # a later call with only one flag keeps the other, whichever side of the command it is on
    out = nylon("--key", "nyl_new_key", "configure", "--no-check", env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(cfg.read_text()) == {"url": "http://nylon.example:8000", "api_key": "nyl_new_key"}


@pytest.mark.django_db(transaction=True)
def test_flags_after_any_command_win_over_the_environment(nylon_server, world, tmp_path):
    env = {"NYLON_CONFIG": str(tmp_path / "none.json"), "NYLON_URL": "http://127.0.0.1:9",
           "NYLON_API_KEY": "nyl_bad_key"}
    out = nylon("resonate", "anything", "--url", nylon_server.url, "--key", world["a"].key, env=env)
    assert out.returncode == 0, out.stderr
    # flags before the command are not reset by the command's own (absent) ones
    out = nylon("--url", nylon_server.url, "--key", world["a"].key, "resonate", "anything", env=env)
    assert out.returncode == 0, out.stderr
