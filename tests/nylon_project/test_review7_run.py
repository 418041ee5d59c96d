"""``manage.py nylon_run`` as one instance per data dir, with real processes:

- two runs started at the same moment on one data dir: one serves, the other fails at once naming
  it (whatever port it asked for), instead of both "serving" with two workers and two beats;
- a web child that cannot bind because someone else took the port stops everything with a clear
  error instead of being restarted forever under a "serving" banner;
- SIGKILL of the supervisor takes web, worker and beat with it (nothing left on the port);
- pids of processes killed without cleaning up are dropped from the embedded Postgres' handle
  list, so the server stops again when its last live user exits."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest
from django.core.management import CommandError, call_command

from nylon_project.live import free_port, live_env, stop_group
from nylon_project.management.commands import nylon_run

ROOT = Path(__file__).resolve().parents[2]


def _run_env(home: Path) -> dict:
    """The test database, a Redis database and queue no one else uses (beat and worker run for
    real), and a data dir of its own."""
    redis = urlsplit(os.environ["REDIS_URL"])._replace(path="/14").geturl()
    return live_env(NYLON_HOME=str(home), REDIS_URL=redis, NYLON_CELERY_QUEUE=f"test-run-{uuid.uuid4().hex[:8]}",
                    NYLON_CACHE_PREFIX=f"test-run-{uuid.uuid4().hex[:8]}", NYLON_WORKER_CONCURRENCY="1",
                    PYTHONUNBUFFERED="1")  # the banner is read from the log while the run goes on


class Run:
    def __init__(self, env: dict, port: int, log: Path):
        self.log_path, self.port = log, port
        with open(log, "w") as fh:
            # A session of its own: whatever outlives the test is killed by group at the end.
            self.proc = subprocess.Popen([sys.executable, "manage.py", "nylon_run", "--port", str(port), "--no-seed"],
                                         cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def out(self) -> str:
        return self.log_path.read_text(errors="replace")

    def serving(self) -> bool:
        return "Nylon is serving" in self.out()

    def cleanup(self) -> None:
        stop_group(self.proc)
        self.proc.wait(timeout=10)


def _wait(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def _gone(procs: list[psutil.Process]) -> bool:
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            pass
    return True


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_runs_started_together_on_one_data_dir_only_one_serves(tmp_path):
    env = _run_env(tmp_path / "home")
    runs = [Run(env, free_port(), tmp_path / f"run{i}.log") for i in range(2)]  # two ports, one data dir
    third = None
    try:
        _wait(lambda: all(r.proc.poll() is not None or r.serving() for r in runs), 240, "a run to serve")
        winner, loser = (runs[0], runs[1]) if runs[0].serving() else (runs[1], runs[0])
        assert winner.proc.poll() is None, winner.out()
        assert loser.proc.wait(timeout=60) != 0, loser.out()
        assert not loser.serving(), loser.out()
        assert f"pid {winner.proc.pid}" in loser.out() and "already running" in loser.out(), loser.out()
        # Nothing of the loser's is running: the winner's worker and beat are the only ones.
        ours = [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"]
                and env["NYLON_CELERY_QUEUE"] in " ".join(p.info["cmdline"])]
        workers = [p for p in ours if p.ppid() not in {q.pid for q in ours}]  # not their pool children
        assert [p.ppid() for p in workers] == [winner.proc.pid], [p.info["cmdline"] for p in workers]

        # the winner's own port, later: refused by the lock too, naming the holder
        third = Run(env, winner.port, tmp_path / "run3.log")
        assert third.proc.wait(timeout=90) != 0
        assert f"pid {winner.proc.pid}, serving on 127.0.0.1:{winner.port}" in third.out(), third.out()
        assert "NYLON_HOME" in third.out() and "restarting" not in winner.out()
    finally:
        for r in [*runs, *([third] if third else [])]:
            r.cleanup()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_sigkill_of_the_supervisor_takes_its_children_with_it(tmp_path):
    env = _run_env(tmp_path / "home")
    run = Run(env, free_port(), tmp_path / "run.log")
    try:
        _wait(lambda: run.proc.poll() is not None or run.serving(), 240, "the run to serve")
        assert run.serving(), run.out()
        _wait(lambda: len(_descendants(run.proc.pid)) >= 3, 60, "web, worker and beat")
        children = _descendants(run.proc.pid)
        os.kill(run.proc.pid, signal.SIGKILL)
        run.proc.wait(timeout=10)
        _wait(lambda: _gone(children), 20, f"the children {[p.pid for p in children]} to stop")
        assert nylon_run.port_in_use("127.0.0.1", run.port) is None  # a later make run can serve
        lock = nylon_run.lock_instance(tmp_path / "home", "127.0.0.1", run.port)  # and lock the data
        lock.close()
    finally:
        run.cleanup()


@pytest.mark.timeout(180)  # before the fix the web was restarted forever: this ends it as a failure
def test_web_that_cannot_bind_stops_everything(monkeypatch, tmp_path):
    """Another server takes the port between the check and uvicorn binding it: the real uvicorn
    fails to bind, and the run stops with an error instead of restarting it for ever."""
    monkeypatch.setenv("NYLON_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(nylon_run, "call_command", lambda *a, **kw: None)  # no migrate: not about the DB
    port = free_port()
    thief = socket.socket()
    pids = tmp_path / "pids"
    pids.mkdir()
    real_start = nylon_run.Child.start

    def start(self):
        if self.name == "web":
            if thief.fileno() != -1 and not thief.getsockname()[1]:
                thief.bind(("127.0.0.1", port))
                thief.listen()
        else:  # stand-ins for worker and beat: only their stopping matters here
            self.cmd = [sys.executable, "-c", f"import os, time; open({str(pids / self.name)!r}, 'w')"
                                              f".write(str(os.getpid())); time.sleep(120)"]
        real_start(self)

    monkeypatch.setattr(nylon_run.Child, "start", start)
    stdout = []
    try:
        with pytest.raises(CommandError) as err:
            call_command("nylon_run", "--port", str(port), "--no-seed", stdout=_Sink(stdout), stderr=_Sink([]))
    finally:
        thief.close()
    assert err.value.returncode == 1
    assert f"127.0.0.1:{port} is taken by another process" in str(err.value)
    assert not any("Nylon is serving" in line for line in stdout)
    for name in ("beat", "worker"):
        with pytest.raises(ProcessLookupError):
            os.kill(int((pids / name).read_text()), 0)


class _Sink:
    def __init__(self, lines: list):
        self.lines = lines

    def write(self, text: str) -> None:
        self.lines.append(text)

    def flush(self) -> None:
        pass


@pytest.mark.slow
def test_dead_pids_are_pruned_from_the_embedded_postgres_handles(tmp_path):
    """A process attached to the embedded server and killed with SIGKILL stays in its handle list,
    and the server never stopped again. The next run drops it; then the last live user's exit
    stops the server."""
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "NYLON_EMBEDDED_PG")}
    env.update(NYLON_HOME=str(home), NYLON_DB_POOL="0")
    holder = subprocess.Popen([sys.executable, "manage.py", "shell", "-c",
                               "import time; print('attached', flush=True); time.sleep(300)"],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
    pgdata = home / "pg"
    postmaster = None
    try:
        for line in holder.stdout:  # after the shell's own banner
            if line.strip() == "attached":
                break
        else:
            raise AssertionError(f"the shell exited with {holder.wait()}")
        postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
        assert json.loads((pgdata / ".handle_pids.json").read_text()) == [holder.pid]
        os.kill(holder.pid, signal.SIGKILL)  # the process only: Postgres is not in its group, but be sure
        holder.wait(timeout=10)
        assert json.loads((pgdata / ".handle_pids.json").read_text()) == [holder.pid]  # the leak

        out = subprocess.run([sys.executable, "manage.py", "shell", "-c",
                              "from nylon_project.management.commands.nylon_run import prune_dead_pg_handles; "
                              "print('pruned', prune_dead_pg_handles())"],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert f"pruned [{holder.pid}]" in out.stdout, out.stdout + out.stderr
        # that process was then the only user left: its exit stopped the server
        _wait(lambda: not psutil.pid_exists(postmaster) or psutil.Process(postmaster).status() == psutil.STATUS_ZOMBIE,
              30, "the embedded Postgres to stop")
    finally:
        if holder.poll() is None:
            holder.kill()
        pidfile = pgdata / "postmaster.pid"
        if pidfile.exists():  # whatever failed above, the scratch server must not outlive the test
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pidfile.read_text().split()[0]), signal.SIGTERM)
