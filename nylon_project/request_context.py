"""The request id of the work in progress, so one write can be followed from the API to the worker.

The API middleware sets it for the length of a request; a Celery task sent meanwhile carries it
in a message header (``before_task_publish``) and the worker restores it around the task
(``task_prerun``/``task_postrun``, wired in ``nylon_project.celery``). ``RequestIdFilter`` puts
it on every log record, web and worker alike; work that no request started (beat, the worker's
own housekeeping) logs ``-``. A task sent by a task keeps the id of the request that started the
chain (the worker's context holds it while the task runs). Work sent after the request's
middleware returned, or from a thread that did not copy its context, logs ``-`` like beat work
unless it sets the id itself, as the proxy's write-back does (``proxy.views._db_call``)."""

from __future__ import annotations

import logging
import re
from contextvars import ContextVar, Token

# The Celery message header; namespaced so it cannot clash with Celery's own request fields.
HEADER = "nylon_request_id"
# What goes into logs and headers: a caller's X-Request-Id is kept only when it matches this
# (``\Z``, not ``$``: ``$`` also matches before a final newline, which would split a log line and
# make Django refuse the response header, a 500).
SAFE_REQUEST_ID = re.compile(r"\A[A-Za-z0-9._-]{1,64}\Z")
NONE = "-"

_current: ContextVar[str | None] = ContextVar("nylon_request_id", default=None)


def current_request_id() -> str | None:
    return _current.get()


def set_request_id(value: str | None) -> Token:
    return _current.set(value)


def reset_request_id(token: Token) -> None:
    _current.reset(token)


def clean(value: object) -> str | None:
    """A header value fit for a log line, else None (a broker message is not trusted further)."""
    return value if isinstance(value, str) and SAFE_REQUEST_ID.match(value) else None


# --- Celery: the publish side and the worker side --------------------------------------------------

def stamp_headers(headers: dict | None) -> None:
    """``before_task_publish``: the current request's id into the message being sent."""
    rid = current_request_id()
    if rid and headers is not None and HEADER not in headers:
        headers[HEADER] = rid


# Tokens of the tasks running in this process, by task id: postrun restores what prerun replaced.
_task_tokens: dict[str, Token] = {}


def task_started(task_id: str | None, task) -> None:
    """``task_prerun``: the id the message carries, or none, for the length of the task."""
    request = getattr(task, "request", None)
    if task_id is None or request is None or request.get("is_eager"):
        return  # an eager task runs inside its caller, whose context already says who started it
    _task_tokens[task_id] = set_request_id(clean(request.get(HEADER)))


def task_finished(task_id: str | None) -> None:
    """``task_postrun``: the worker's context as before the task."""
    token = _task_tokens.pop(task_id, None) if task_id is not None else None
    if token is None:
        return
    try:
        reset_request_id(token)
    except ValueError:  # set in another context (a pool that moved the task): just clear it
        set_request_id(None)


class RequestIdFilter(logging.Filter):
    """Adds ``request_id`` to every record that passes the handler it is attached to."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            # Django logs a 4xx/5xx response ("Not Found: …") after the middleware returned, with
            # the request on the record: its id is still the one to show.
            record.request_id = (current_request_id() or clean(getattr(getattr(record, "request", None),
                                                                       "request_id", None)) or NONE)
        return True


class DisallowedHostFilter(logging.Filter):
    """A request for a host Nylon does not serve is the client's mistake (a balancer probing with its
    own ``Host``), answered 400: one warning line naming the setting to change, not an ERROR with a
    30-line traceback on every probe, nor Django's advice to edit ``ALLOWED_HOSTS``, which an
    operator sets through ``NYLON_ALLOWED_HOSTS``."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = record.getMessage().replace("to ALLOWED_HOSTS", "to NYLON_ALLOWED_HOSTS")
        record.args = None
        record.exc_info = record.exc_text = record.stack_info = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True
