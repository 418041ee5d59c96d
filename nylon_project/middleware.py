"""Request id on every request (audit and logs), and a hard body-size limit before parsing."""

from __future__ import annotations

import uuid

from django.conf import settings

from .errors import error_response
from .request_context import SAFE_REQUEST_ID, reset_request_id, set_request_id


def request_id_for(incoming: str) -> str:
    """The caller's X-Request-Id when it is safe to log, else a fresh one."""
    return incoming if SAFE_REQUEST_ID.match(incoming) else uuid.uuid4().hex


class RequestIdMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.request_id = request_id_for(request.headers.get("X-Request-Id", ""))
        # For the request's log lines and the Celery tasks it sends: the services' commits, and so
        # their on_commit enqueues, happen inside the view, within this block.
        token = set_request_id(request.request_id)
        try:
            response = self.get_response(request)
        finally:
            reset_request_id(token)
        response["X-Request-Id"] = request.request_id
        return response


IMPORT_PATHS = frozenset({"/api/v1/import", "/api/v1/import/"})  # assets.apis.ImportApi: a whole export file


class BodySizeLimitMiddleware:
    """Refuse oversize bodies with 413 from the declared length, before anything reads them."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        length = request.META.get("CONTENT_LENGTH")
        try:
            size = int(length) if length else _buffered_size(request)
        except ValueError:
            size = -1
        limit = settings.NYLON_MAX_IMPORT_BYTES if request.path_info in IMPORT_PATHS else settings.NYLON_MAX_BODY_BYTES
        if size < 0 or size > limit:
            return error_response(request, 413, "payload_too_large", f"Request body exceeds {limit} bytes.")
        return self.get_response(request)


def _buffered_size(request) -> int:
    """A body without Content-Length (chunked): under ASGI Django has already buffered all of it
    into the request's stream, and would parse it whatever its size; measure that buffer."""
    stream = getattr(request, "_stream", None)
    if stream is None or not hasattr(stream, "seek") or not hasattr(stream, "tell"):
        return 0
    try:
        pos = stream.tell()
        stream.seek(0, 2)
        size = stream.tell()
        stream.seek(pos)
    except (OSError, ValueError):
        return 0
    return size - pos


class MethodNotAllowedPageMiddleware:
    """A browser visiting a console address that only takes a form's POST (a bookmarked "delete" or
    "resolve" link, ``/logout/`` typed in) got a 405 with an empty body, which browsers show as their
    own blank error. The console's page says what the address is for; the 405 and its Allow header stay."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if (response.status_code == 405 and not response.content and request.method == "GET"
                and not request.path.startswith("/api/")):
            from django.template.loader import render_to_string

            response.content = render_to_string("frontend/forbidden.html", {
                "heading": "Not a page",
                "message": "This address only takes a form's submission (a button in the console), "
                           "not a visit. Nothing was changed.",
            }, request=request)
            response["Content-Type"] = "text/html; charset=utf-8"
        return response
