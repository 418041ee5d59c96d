"""The request id travels with the work a request queues: into the Celery message (the publish
signal), back into the context while the worker runs the task (prerun), out again after it
(postrun), and onto every log record (the filter). The real worker, end to end:
tests/nylon_project/test_request_id_worker.py."""

from __future__ import annotations

import logging
import re
import uuid

import pytest
from celery import Celery
from celery.worker.request import Request

import nylon_project.celery  # noqa: F401  (connects the signal handlers under test)
from nylon_project import request_context
from nylon_project.request_context import HEADER, RequestIdFilter, current_request_id


@pytest.fixture
def memory_app():
    """A Celery app on the in-memory broker: messages are really serialised and sent (so the
    publish signal runs), and read back from the queue as the worker would."""
    app = Celery(f"rt-{uuid.uuid4().hex[:6]}", broker="memory://", backend="cache+memory://", set_as_current=False)
    queue = f"rt-{uuid.uuid4().hex[:8]}"
    app.conf.task_default_queue = queue
    seen: list[tuple[str | None, str]] = []
    log = logging.getLogger("nylon.test.request_context")

    @app.task(name="rt.record", bind=True)
    def record(self, label: str) -> str | None:
        log.warning("working on %s", label)
        seen.append((current_request_id(), label))
        return current_request_id()

    def run_next() -> None:
        """Take the next message off the queue and run it through the worker's own request path
        (``Request.execute``: trace_task with its prerun/postrun signals), in this thread."""
        with app.connection_for_read() as conn:
            q = conn.SimpleQueue(queue)
            try:
                message = q.get(timeout=2)
                Request(message, app=app, task=record).execute()
            finally:
                q.close()

    return app, record, run_next, seen


def test_a_task_sent_during_a_request_runs_under_its_id_and_the_next_one_does_not(memory_app, caplog):
    app, record, run_next, seen = memory_app
    token = request_context.set_request_id("req-7f3a")
    try:
        record.delay("queued by the request")
    finally:
        request_context.reset_request_id(token)
    record.delay("queued by the beat")  # no request in progress: no header

    caplog.handler.addFilter(RequestIdFilter())
    with caplog.at_level(logging.WARNING, logger="nylon.test.request_context"):
        run_next()
        assert current_request_id() is None  # postrun put the worker's context back
        run_next()
    # Same thread, one after the other: a context left set by the first task would show in the second.
    assert seen == [("req-7f3a", "queued by the request"), (None, "queued by the beat")]
    lines = [(r.request_id, r.getMessage()) for r in caplog.records if r.name == "nylon.test.request_context"]
    assert lines == [("req-7f3a", "working on queued by the request"), ("-", "working on queued by the beat")]


def test_the_header_is_only_what_the_publisher_stamped(memory_app):
    """A header that is not a safe id (a crafted message) is not restored into log lines."""
    app, record, run_next, seen = memory_app
    record.apply_async(("crafted",), headers={HEADER: "evil\nINFO forged line"})
    run_next()
    assert seen == [(None, "crafted")]


def test_a_header_ending_in_a_newline_is_not_restored(memory_app):
    """``$`` matches before a final newline: "forged\n" passed as safe and split the worker's line."""
    app, record, run_next, seen = memory_app
    record.apply_async(("crafted",), headers={HEADER: "forged\n"})
    run_next()
    assert seen == [(None, "crafted")]


def test_stamp_keeps_an_explicit_header_and_adds_none_outside_a_request():
    headers: dict = {}
    request_context.stamp_headers(headers)
    assert headers == {}
    token = request_context.set_request_id("req-1")
    try:
        explicit = {HEADER: "req-0"}
        request_context.stamp_headers(explicit)
        request_context.stamp_headers(headers)
    finally:
        request_context.reset_request_id(token)
    assert explicit == {HEADER: "req-0"} and headers == {HEADER: "req-1"}


def test_the_filter_names_the_current_request_or_a_dash():
    f = RequestIdFilter()
    outside = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
    f.filter(outside)
    token = request_context.set_request_id("req-2")
    try:
        inside = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
        f.filter(inside)
    finally:
        request_context.reset_request_id(token)
    assert (outside.request_id, inside.request_id) == ("-", "req-2")


# --- the web process ---------------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_a_line_logged_on_commit_of_a_write_names_the_request(world, client_for, settings, caplog):
    """The enqueue after commit runs inside the request (the service's own transaction commits in
    the view): its log line, here the warning of a broker that is down, carries the request's id."""
    from tests.reflection.test_worker_followups import broker_down

    settings.NYLON_ENQUEUE_TASKS = True
    caplog.handler.addFilter(RequestIdFilter())
    with broker_down(), caplog.at_level(logging.WARNING, logger="nylon.reflection"):
        r = client_for(world["a"].key).post(
            "/api/v1/memories/weave-session", {"session_key": "s", "turns": [{"speaker": "Ana", "text": "Hi."}]},
            format="json", HTTP_X_REQUEST_ID="web-commit-1")
    assert r.status_code == 201, r.content
    lines = [r.request_id for r in caplog.records if "could not enqueue" in r.getMessage()]
    assert lines == ["web-commit-1"]


def test_django_s_response_line_names_the_request(world, client_for, caplog):
    """Django logs "Not Found: …" after the middleware chain returned; the id comes off the request."""
    caplog.handler.addFilter(RequestIdFilter())
    with caplog.at_level(logging.WARNING, logger="django.request"):
        r = client_for(world["a"].key).get("/api/v1/memories/987654321", HTTP_X_REQUEST_ID="web-404-1")
    assert r.status_code == 404
    assert [r.request_id for r in caplog.records if r.name == "django.request"] == ["web-404-1"]


@pytest.mark.parametrize("hostile", ["web-1\n", "web-1\nINFO forged line", "x" * 65, "a b", "id\r"])
def test_a_hostile_request_id_is_replaced_not_logged_or_echoed(world, client_for, caplog, hostile):
    """A caller's X-Request-Id that is not a plain token is replaced by a fresh one: in the response
    header (a newline there made Django refuse the header, a 500) and on the request's log lines."""
    caplog.handler.addFilter(RequestIdFilter())
    with caplog.at_level(logging.WARNING, logger="django.request"):
        r = client_for(world["a"].key).get("/api/v1/memories/987654321", HTTP_X_REQUEST_ID=hostile)
    assert r.status_code == 404
    rid = r["X-Request-Id"]
    assert rid != hostile and re.fullmatch(r"[0-9a-f]{32}", rid) and r.json()["request_id"] == rid
    assert [rec.request_id for rec in caplog.records if rec.name == "django.request"] == [rid]


def test_the_configured_log_handler_prints_the_id():
    """settings.LOGGING as Django applied it in this process: the root handler prints the id."""
    handlers = [h for h in logging.getLogger().handlers if any(isinstance(f, RequestIdFilter) for f in h.filters)]
    assert handlers, "no root handler carries the request id filter"
    record = logging.LogRecord("nylon.x", logging.INFO, __file__, 1, "wrote %s", ("it",), None)
    token = request_context.set_request_id("cfg-1")
    try:
        assert handlers[0].filter(record)
    finally:
        request_context.reset_request_id(token)
    assert "[cfg-1] wrote it" in handlers[0].format(record)
