"""A real Nylon web process for black-box tests: uvicorn on a free loopback port, bound to this
pytest process's test database (tests using it need ``django_db(transaction=True)`` so their rows
are committed and visible to it)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_live_server(**env_overrides: str) -> LiveServer:
    from django.db import connection

    from nylon_project import embedded

    port = free_port()
    env = dict(os.environ)
    env["DATABASE_URL"] = embedded.url_with_database(os.environ["DATABASE_URL"], connection.settings_dict["NAME"])
    env["NYLON_CACHE_PREFIX"] = f"test-live-{uuid.uuid4().hex[:8]}"  # throttles and stats of its own
    env.setdefault("NYLON_ENQUEUE_TASKS", "0")
    env.update(env_overrides)
    log_path = embedded.nylon_home() / f"uvicorn-{port}.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "nylon_project.asgi:application", "--host", "127.0.0.1",
         "--port", str(port), "--no-access-log", "--lifespan", "off"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    log.close()
    server = LiveServer(url=f"http://127.0.0.1:{port}", proc=proc, log_path=log_path, env=env)
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"uvicorn exited:\n{server.log()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return server
        except OSError:
            time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"uvicorn did not listen in time:\n{server.log()[-3000:]}")
