"""``manage.py nylon_run`` as a supervisor: a busy port is refused before anything starts, and with
``--no-restart`` a dead child stops the others and the command fails."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from nylon_project.live import free_port
from nylon_project.management.commands import nylon_run

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def busy_port():
    """A loopback port with a listener on it, as another server would hold it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", free_port()))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.fixture
def no_setup(monkeypatch, tmp_path):
    """migrate/seed_demo replaced by a recorder: these tests are about the supervisor, not the DB.
    A data dir of their own, so its run lock is not the one a `make run` on this checkout holds."""
    monkeypatch.setenv("NYLON_HOME", str(tmp_path / "home"))
    calls: list[str] = []
    monkeypatch.setattr(nylon_run, "call_command", lambda name, *a, **kw: calls.append(name))
    return calls


def test_busy_port_is_refused_before_anything_starts(busy_port, no_setup, monkeypatch):
    started: list[str] = []
    monkeypatch.setattr(nylon_run.Child, "start", lambda self: started.append(self.name))
    with pytest.raises(CommandError) as err:
        call_command("nylon_run", "--host", "127.0.0.1", "--port", str(busy_port), "--no-seed", "--no-restart")
    msg = str(err.value)
    assert f"127.0.0.1:{busy_port}" in msg and "--port" in msg and "NYLON_PORT" in msg
    assert no_setup == [] and started == []  # not even a migrate


def test_busy_port_exits_non_zero_from_the_command_line(busy_port, tmp_path):
    # Unreachable Postgres/Redis: nothing embedded is started, and should the check ever go
    # missing the command fails at migrate instead of touching a real database or queue.
    env = {**os.environ, "DATABASE_URL": "postgres://nylon@127.0.0.1:1/nylon", "REDIS_URL": "redis://127.0.0.1:1/0",
           "NYLON_DB_POOL": "0", "NYLON_HOME": str(tmp_path)}
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "manage.py", "nylon_run", "--port", str(busy_port), "--no-seed",
                          "--no-restart"], cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode != 0, out.stdout + out.stderr
    assert f":{busy_port}" in out.stderr and "NYLON_PORT" in out.stderr
    assert "serving" not in out.stdout
    assert time.monotonic() - t0 < 30


def test_free_port_passes_the_check():
    assert nylon_run.port_in_use("127.0.0.1", free_port()) is None


def test_no_restart_fails_when_a_child_dies(no_setup, monkeypatch, tmp_path):
    # The real children swapped for stand-ins: "web" crashes with 3, the others would run on.
    pids = tmp_path / "pids"
    pids.mkdir()
    crash = [sys.executable, "-c", "import time, sys; time.sleep(0.3); sys.exit(3)"]
    real_start = nylon_run.Child.start

    def start(self):
        self.cmd = crash if self.name == "web" else [
            sys.executable, "-c",
            f"import os, time; open({str(pids / self.name)!r}, 'w').write(str(os.getpid())); time.sleep(60)"]
        real_start(self)

    monkeypatch.setattr(nylon_run.Child, "start", start)
    t0 = time.monotonic()
    with pytest.raises(CommandError) as err:
        call_command("nylon_run", "--port", str(free_port()), "--no-seed", "--no-restart")
    assert err.value.returncode != 0
    assert "web exited with 3" in str(err.value)
    assert time.monotonic() - t0 < 15
    # the survivors were stopped (and reaped), not left running
    survivors = sorted(p.name for p in pids.iterdir())
    assert survivors == ["beat", "worker"]
    for name in survivors:
        with pytest.raises(ProcessLookupError):
            os.kill(int((pids / name).read_text()), 0)


def test_children_run_with_two_malloc_arenas_unless_the_operator_says(monkeypatch):
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setenv("NYLON_MARKER", "kept")
    env = nylon_run.child_env()
    assert env["MALLOC_ARENA_MAX"] == "2" and env["NYLON_MARKER"] == "kept"
    monkeypatch.setenv("MALLOC_ARENA_MAX", "8")
    assert nylon_run.child_env()["MALLOC_ARENA_MAX"] == "8"
