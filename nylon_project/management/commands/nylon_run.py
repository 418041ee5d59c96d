"""`make run`: migrate, seed the demo org, then run the ASGI server, a Celery worker and beat in
the foreground. Ctrl-C (or SIGTERM) stops all three and waits for them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run Nylon: ASGI server + Celery worker + Celery beat, on the configured services."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("NYLON_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("NYLON_PORT", "8000")))
        parser.add_argument("--web-workers", type=int, default=int(os.environ.get("NYLON_WEB_WORKERS", "1")))
        parser.add_argument("--concurrency", type=int, default=int(os.environ.get("NYLON_WORKER_CONCURRENCY", "2")))

    def handle(self, *args, host: str, port: int, web_workers: int, concurrency: int, **opts):
        call_command("migrate", interactive=False, verbosity=0)
        call_command("seed_demo")
        py = sys.executable
        env = dict(os.environ)  # carries DATABASE_URL/REDIS_URL resolved by the embedded bootstrap
        queue = settings.CELERY_TASK_DEFAULT_QUEUE
        commands = {
            "web": [py, "-m", "uvicorn", "nylon_project.asgi:application", "--host", host, "--port", str(port),
                    "--workers", str(web_workers), "--no-access-log"],
            "worker": [py, "-m", "celery", "-A", "nylon_project", "worker", "-l", "INFO", "-Q", queue,
                       "--concurrency", str(concurrency), "-n", f"nylon-{os.getpid()}@%h"],
            "beat": [py, "-m", "celery", "-A", "nylon_project", "beat", "-l", "INFO",
                     "--schedule", settings.CELERY_BEAT_SCHEDULE_FILENAME],
        }
        procs = {name: subprocess.Popen(cmd, env=env) for name, cmd in commands.items()}
        self.stdout.write(self.style.SUCCESS(f"Nylon is serving on http://{host}:{port}/ "
                                             f"(health: /healthz, API docs: /api/docs/). Ctrl-C stops."))
        stopping = False

        def stop(*_):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            while not stopping:
                for name, p in procs.items():
                    if p.poll() is not None:
                        self.stderr.write(f"{name} exited with {p.returncode}; stopping the others.")
                        stopping = True
                time.sleep(0.5)
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            deadline = time.time() + 20
            for p in procs.values():
                try:
                    p.wait(timeout=max(0.1, deadline - time.time()))
                except subprocess.TimeoutExpired:
                    p.kill()
            self.stdout.write("Nylon stopped.")
