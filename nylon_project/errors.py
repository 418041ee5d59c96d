"""One error shape for the whole API: {"error": {"code", "message", "fields"}, "request_id"}."""

from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"
    default_detail = "The object changed since you read it."


class ServiceUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "unavailable"
    default_detail = "A dependency is unavailable."


class DatabaseUnavailable(ServiceUnavailable):
    """Postgres unreachable (restart, failover, connections exhausted): retryable, so a 503 with
    Retry-After instead of a 500. Writes are idempotent on ``event_id``, so retrying is safe."""

    default_detail = "The database is unavailable or busy; retry shortly."
    wait = 1  # seconds, sent as Retry-After


log = logging.getLogger("nylon.errors")


def _flatten(detail) -> dict:
    if isinstance(detail, dict):
        return {k: _flatten_value(v) for k, v in detail.items()}
    return {}


def _flatten_value(v):
    if isinstance(v, list):
        return [_flatten_value(x) for x in v]
    if isinstance(v, dict):
        return {k: _flatten_value(x) for k, x in v.items()}
    return str(v)


def exception_handler(exc, context):
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(
            exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        )
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, (OperationalError, InterfaceError)):
        log.warning("database unavailable: %s", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        exc = DatabaseUnavailable()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    request = context.get("request")
    if response.status_code == 403:
        _audit_denial(exc, context)
    detail = exc.detail if isinstance(exc, exceptions.APIException) else None
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(detail) if isinstance(detail, dict) else {"non_field_errors": _flatten_value(detail)}
        message = "Invalid input."
        code = "invalid"
    else:
        fields = {}
        message = str(detail) if detail is not None else response.status_text
        code = getattr(exc, "default_code", "error")
        if isinstance(detail, exceptions.ErrorDetail):
            code = detail.code or code
    body = error_body(code, message, fields=fields, request=request)
    headers = {k: v for k, v in response.items()}
    return Response(body, status=response.status_code, headers=headers)


def _audit_denial(exc, context) -> None:
    """Every refused action reaches the audit log (``assets.audit.record_denial``)."""
    request = context.get("request")
    if request is None:
        return
    from assets import audit

    audit.record_denial(actor=getattr(request, "actor", None), exc=exc,
                        action=f"{request.method.lower()}.{type(context.get('view')).__name__}", object_type="api",
                        url_kwargs=context.get("kwargs") or {}, request_id=getattr(request._request, "request_id", ""))


def error_body(code: str, message: str, *, fields: dict | None = None, request=None,
               request_id: str | None = None) -> dict:
    """The one error shape, with the request's id (``RequestIdMiddleware`` puts it on the request;
    code that answers before Django, such as the load shedder, passes it directly)."""
    body: dict = {"error": {"code": code, "message": message, "fields": fields or {}}}
    request_id = request_id or getattr(request, "request_id", None)
    if request_id:
        body["request_id"] = request_id
    return body


def error_response(request, status: int, code: str, message: str):
    """The error shape for answers built outside DRF: middleware, the proxy, URL-level 404/500."""
    from django.http import JsonResponse

    return JsonResponse(error_body(code, message, request=request), status=status)


def not_found(request, exception=None):
    """URLs that match no route: under /api/ the one error shape with code ``no_endpoint`` (the
    SDK tells it from an object's 404: an older server lacking the endpoint), elsewhere Django's
    page."""
    if request.path.startswith("/api/"):
        return error_response(request, 404, "no_endpoint", "No such endpoint.")
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)


def server_error(request):
    """An unhandled exception: under /api/ the one error shape (the traceback is only logged)."""
    if request.path.startswith("/api/"):
        return error_response(request, 500, "server_error", "Internal server error.")
    from django.views.defaults import server_error as page_server_error

    return page_server_error(request)


def bad_request(request, exception=None):
    """Django's own 400s (a disallowed Host, too many form fields, a suspicious multipart body):
    under /api/ the one error shape, elsewhere Django's page."""
    if request.path.startswith("/api/"):
        return error_response(request, 400, "bad_request", "Bad request.")
    from django.views.defaults import bad_request as page_bad_request

    return page_bad_request(request, exception)


def permission_denied(request, exception=None):
    """A PermissionDenied raised outside DRF (middleware, plain views): under /api/ the one shape."""
    if request.path.startswith("/api/"):
        return error_response(request, 403, "permission_denied", "You do not have permission to perform this action.")
    from django.views.defaults import permission_denied as page_permission_denied

    return page_permission_denied(request, exception)


def csrf_failure(request, reason: str = ""):
    """A form refused for its CSRF token (``CSRF_FAILURE_VIEW``): Django's page said only "More
    information is available with DEBUG=True". Under /api/ the one error shape; elsewhere the
    console's page, saying what to do."""
    if request.path.startswith("/api/"):
        return error_response(request, 403, "csrf_failed",
                              "CSRF check failed: send the form's CSRF token (or use an API key).")
    from django.shortcuts import render
    from django.utils.http import url_has_allowed_host_and_scheme

    back = request.META.get("HTTP_REFERER", "")  # the page the form was on, if it is this site's
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()},
                                           require_https=request.is_secure()):
        back = ""
    return render(request, "frontend/forbidden.html", {
        "heading": "Form expired",
        "message": "This form could not be checked (its security token is missing or out of date, "
                   "for example after signing in again in another tab). Nothing was changed: reload "
                   "the page and send it again.",
        "reload": back,
    }, status=403)
