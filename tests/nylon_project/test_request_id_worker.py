"""One write followed from the API into the real worker's log by its request id: the tasks a request
queues (on commit) log under that request's id; a task sent outside a request logs ``-``."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from memory.models import Followup, MemorySession
from reflection.tasks import probe
from tests.reflection.helpers import TURNS
from tests.reflection.test_worker_background import no_llm, poll

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def _task_lines(log_path: str, task_name: str) -> list[str]:
    """The worker's lines about ``task_name`` (the log is shared by the session's tests)."""
    text = Path(log_path).read_text(errors="replace")
    return [line for line in text.splitlines() if task_name in line]


def test_tasks_queued_by_a_request_log_its_id_in_the_worker(world, client_for, celery_worker_process):
    org = world["a"].org
    no_llm(org)
    rid = f"trace-{uuid.uuid4().hex[:12]}"
    r = client_for(world["a"].key).post(
        "/api/v1/memories/weave-session", {"session_key": "traced", "turns": TURNS, "end_session": True},
        format="json", HTTP_X_REQUEST_ID=rid)
    assert r.status_code == 201, r.content
    assert r["X-Request-Id"] == rid

    def done() -> bool:
        s = MemorySession.objects.get(org=org, key="traced")
        return s.abstraction_status == MemorySession.Status.DONE and not Followup.objects.exists()

    assert poll(done, 60), "the worker never finished the request's background work"
    log = celery_worker_process["log"]
    # Both sent on commit of the weave (the conflict check of its leaves, the abstraction of the
    # ended session); the "succeeded" line is written by the pool process running the task.
    for task in ("reflection.abstract_session", "reflection.detect_conflicts"):
        finished = poll(lambda task=task: [ln for ln in _task_lines(log, task)
                                           if f"[{rid}]" in ln and "succeeded" in ln], 10)
        assert finished, f"no {task} line of the worker carries {rid}"


def test_a_task_sent_outside_a_request_logs_a_dash(world, celery_worker_process):
    token = uuid.uuid4().hex
    result = probe.delay(world["a"].org.id, token)
    assert result.get(timeout=30)
    pattern = re.compile(r"\[-\] .*Task reflection\.probe\[" + re.escape(result.id) + r"\] succeeded")
    assert poll(lambda: [ln for ln in _task_lines(celery_worker_process["log"], "reflection.probe")
                         if pattern.search(ln)], 10)
