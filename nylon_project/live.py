"""Real Nylon processes for black-box tests and the bench scripts: a web process (uvicorn) on a
free loopback port and Celery workers, bound to the database this process uses (a test's database
under pytest — tests using it need ``django_db(transaction=True)`` so their rows are committed and
visible to it — or the dev database in a bench script).

Outside ``tests/`` so the bench scripts import it without importing the test suite."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A loopback port nothing listens on (the OS picks it; it stays free until someone binds it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int, host: str = "127.0.0.1", timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def stop_group(proc: subprocess.Popen, timeout: float = 40.0) -> None:
    """SIGTERM to a process started in a session of its own (a ``nylon_run``: it stops its children),
    up to ``timeout`` s for it, then SIGKILL to whatever of its group is left."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def live_env(**overrides: str) -> dict[str, str]:
    """This process's environment with ``DATABASE_URL`` naming the database Django is connected to
    (under pytest the per-process test database, not the one in the environment)."""
    from django.db import connection

    from nylon_project import embedded

    env = dict(os.environ)
    env["DATABASE_URL"] = embedded.url_with_database(os.environ["DATABASE_URL"], connection.settings_dict["NAME"])
    env.update(overrides)
    return env


@dataclass
class LiveServer:
    url: str
    proc: subprocess.Popen
    log_path: Path
    env: dict

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


def start_live_server(*, workers: int = 1, log_name: str = "uvicorn", **env_overrides: str) -> LiveServer:
    """uvicorn on a free port, returned once it listens. Background tasks are off unless
    ``NYLON_ENQUEUE_TASKS="1"`` is passed; the throttle and stats get a Redis prefix of their own."""
    from nylon_project import embedded

    port = free_port()
    env = live_env(NYLON_CACHE_PREFIX=f"test-live-{uuid.uuid4().hex[:8]}")
    env.setdefault("NYLON_ENQUEUE_TASKS", "0")
    env.update(env_overrides)
    log_path = embedded.nylon_home() / f"{log_name}-{port}.log"
    args = [sys.executable, "-m", "uvicorn", "nylon_project.asgi:application", "--host", "127.0.0.1",
            "--port", str(port), "--no-access-log", "--lifespan", "off"]
    if workers > 1:
        args += ["--workers", str(workers)]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    server = LiveServer(url=f"http://127.0.0.1:{port}", proc=proc, log_path=log_path, env=env)
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"uvicorn exited:\n{server.log()[-3000:]}")
        if listening(port):
            return server
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"uvicorn did not listen in time:\n{server.log()[-3000:]}")


def start_worker(queue: str, env: dict, *, name: str | None = None, concurrency: int = 1, loglevel: str = "WARNING",
                 log: IO | int = subprocess.DEVNULL, own_group: bool = False) -> subprocess.Popen:
    """A Celery worker consuming only ``queue``, named ``<name or queue>@<host>`` (what
    ``app.control.ping(destination=…)`` asks). ``own_group``: a process group of its own, so the
    worker can be killed together with its pool children."""
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "nylon_project", "worker", "-Q", queue, "-l", loglevel,
         "--concurrency", str(concurrency), "-n", f"{name or queue}@%h", "--without-gossip", "--without-mingle"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=own_group,
    )
