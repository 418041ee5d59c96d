"""Two processes started at once (`make run`: web, worker, beat) attach to one embedded Redis."""

from __future__ import annotations

import threading
import time

from nylon_project import embedded


def test_concurrent_redis_starts_share_one_server(tmp_path, monkeypatch):
    monkeypatch.setenv("NYLON_HOME", str(tmp_path))
    listening: set[int] = set()
    started: list[int] = []

    def fake_run(cmd, check):
        time.sleep(0.2)  # a real redis-server takes a moment to come up: the race window
        port = int(cmd[cmd.index("--port") + 1])
        started.append(port)
        listening.add(port)

    monkeypatch.setattr(embedded.subprocess, "run", fake_run)
    monkeypatch.setattr(embedded, "_listening", lambda host, port, timeout=0.3: port in listening)
    urls: list[str] = []
    threads = [threading.Thread(target=lambda: urls.append(embedded._start_embedded_redis())) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(started) == 1, started
    assert len(set(urls)) == 1 and len(urls) == 3
