"""The CLI's first-user audit: ``configure`` checks the key before saving it, ``health`` says whether
the server accepts the key, ``weave --speaker``, a bad JSONL line named by file and line, and
``conflicts resolve N supersede`` keeping the newer memory unless told otherwise."""

from __future__ import annotations

import json

import pytest

from memory.models import Node
from reflection.models import Conflict

from .test_cli import nylon

pytestmark = pytest.mark.django_db(transaction=True)

BAD_KEY = "nyl_abcdefgh_not-a-real-secret"


def _env(tmp_path, **extra) -> dict:
    return {"NYLON_CONFIG": str(tmp_path / "config.json"), "NYLON_URL": "", "NYLON_API_KEY": "", **extra}


def test_configure_refuses_a_key_the_server_rejects(nylon_server, world, tmp_path):
    env = _env(tmp_path)
    cfg = tmp_path / "config.json"
    out = nylon("configure", "--url", nylon_server.url, "--key", BAD_KEY, env=env)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "rejects this key" in out.stderr and "not saved" in out.stderr and "--no-check" in out.stderr
    assert not cfg.exists()

    out = nylon("configure", "--url", nylon_server.url, "--key", world["a"].key, env=env)
    assert out.returncode == 0, out.stderr
    assert "key ok: agent:alpha-bot" in out.stdout and "scopes: read, write" in out.stdout
    assert json.loads(cfg.read_text())["api_key"] == world["a"].key

    # a bad key does not replace the good one
    assert nylon("configure", "--key", BAD_KEY, env=env).returncode == 1
    assert json.loads(cfg.read_text())["api_key"] == world["a"].key
    # unless told to save it unchecked
    assert nylon("configure", "--key", BAD_KEY, "--no-check", env=env).returncode == 0
    assert json.loads(cfg.read_text())["api_key"] == BAD_KEY


def test_configure_cannot_check_an_unreachable_server(tmp_path):
    out = nylon("configure", "--url", "http://127.0.0.1:9", "--key", BAD_KEY, "--timeout", "2", env=_env(tmp_path))
    assert out.returncode == 3 and "could not check the key" in out.stderr
    assert not (tmp_path / "config.json").exists()


def test_health_says_whether_the_key_is_accepted(nylon_server, world, tmp_path):
    out = nylon("health", env=_env(tmp_path, NYLON_URL=nylon_server.url, NYLON_API_KEY=BAD_KEY))
    assert out.stdout.startswith("status: ")
    assert "key: REJECTED: 401" in out.stdout and out.returncode == 1, (out.stdout, out.stderr)

    out = nylon("health", env=_env(tmp_path, NYLON_URL=nylon_server.url, NYLON_API_KEY=world["a"].key))
    assert "key: ok: agent:alpha-bot" in out.stdout, out.stdout

    out = nylon("health", "--json", env=_env(tmp_path, NYLON_URL=nylon_server.url, NYLON_API_KEY=BAD_KEY))
    assert json.loads(out.stdout)["key"]["status"] == "rejected"

    out = nylon("health", env=_env(tmp_path, NYLON_URL=nylon_server.url))
    assert "key: no key configured" in out.stdout


def test_weave_takes_a_speaker(nylon_server, world, tmp_path):
    env = _env(tmp_path, NYLON_URL=nylon_server.url, NYLON_API_KEY=world["a"].key)
    turns = tmp_path / "turns.jsonl"
    turns.write_text(json.dumps({"text": "Ana owns the billing service."}) + "\n"
                     + json.dumps({"text": "Ben is on call.", "speaker": "ben"}) + "\n")
    out = nylon("weave", str(turns), "--session", "s", "--speaker", "ana", "--quiet", env=env)
    assert out.returncode == 0, out.stderr
    assert dict(Node.objects.filter(org=world["a"].org).values_list("text", "speaker")) == {
        "Ana owns the billing service.": "ana", "Ben is on call.": "ben"}
    out = nylon("weave", "--session", "t", "--speaker", "cy", "--quiet", env=env, stdin="Cy joined.\n")
    assert out.returncode == 0 and Node.objects.get(text="Cy joined.").speaker == "cy"


def test_a_bad_jsonl_line_is_named_and_nothing_is_written(nylon_server, world, tmp_path):
    env = _env(tmp_path, NYLON_URL=nylon_server.url, NYLON_API_KEY=world["a"].key)
    turns = tmp_path / "turns.jsonl"
    turns.write_text(json.dumps({"text": "fine"}) + "\n\n" + "{'text': 'single quotes'}\n")
    out = nylon("weave", str(turns), "--session", "s", env=env)
    assert out.returncode == 1
    assert f"error: {turns}:3: not valid JSON (Expecting property name enclosed in double quotes at column 2)" \
        in out.stderr, out.stderr
    assert not Node.objects.filter(org=world["a"].org).exists()


def test_conflicts_resolve_supersede_keeps_the_newer_memory_by_default(nylon_server, world, tmp_path):
    from nylon_sdk import Client

    a = world["a"]
    with Client(nylon_server.url, a.key) as sdk:
        # the first written happened later: the newer is node_a (the smaller id), by occurred_at
        later = sdk.weave("The locker code is 9021.", occurred_at="2026-03-01T10:00:00Z").node_ids[0]
        earlier = sdk.weave("The locker code is 1234.", occurred_at="2026-01-01T10:00:00Z").node_ids[0]
    conflict = Conflict.objects.create(org=a.org, node_a_id=later, node_b_id=earlier, reason="locker code",
                                       detector="rule")
    env = _env(tmp_path, NYLON_URL=nylon_server.url, NYLON_API_KEY=a.key)
    out = nylon("conflicts", "resolve", str(conflict.id), "supersede", env=env)
    assert out.returncode == 0, out.stderr
    assert f"keeping the newer memory {later} (2026-03-01" in out.stderr
    assert f"superseding memory {earlier}" in out.stderr
    assert json.loads(out.stdout)["kept_node_id"] == later
    conflict.refresh_from_db()
    assert conflict.status == Conflict.Status.SUPERSEDED and conflict.kept_node_id == later

    out = nylon("conflicts", "resolve", "999999", "supersede", env=env)
    assert out.returncode == 1 and "no conflict 999999" in out.stderr


def test_conflicts_resolve_supersede_keeps_what_keep_names(nylon_server, world, tmp_path):
    from nylon_sdk import Client

    a = world["a"]
    with Client(nylon_server.url, a.key) as sdk:
        first = sdk.weave("Standup is at 9.", occurred_at="2026-01-01T10:00:00Z").node_ids[0]
        second = sdk.weave("Standup is at 10.", occurred_at="2026-02-01T10:00:00Z").node_ids[0]
    conflict = Conflict.objects.create(org=a.org, node_a_id=first, node_b_id=second, reason="time", detector="rule")
    env = _env(tmp_path, NYLON_URL=nylon_server.url, NYLON_API_KEY=a.key)
    out = nylon("conflicts", "resolve", str(conflict.id), "supersede", "--keep", str(first), env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["kept_node_id"] == first and "keeping" not in out.stderr
