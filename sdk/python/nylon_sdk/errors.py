"""Exceptions: one class per kind of failure, all carrying the API's error shape
``{"error": {"code", "message", "fields"}, "request_id"}``."""

from __future__ import annotations


class NylonError(Exception):
    """Base of every error raised by the SDK."""


class TransportError(NylonError):
    """The service could not be reached (connection refused, reset, DNS...)."""


class Timeout(TransportError):
    """The request did not complete within the client's timeout."""


class APIError(NylonError):
    """The service answered with an error status."""

    def __init__(self, status: int, code: str = "", message: str = "", fields: dict | None = None,
                 request_id: str = "", retry_after: float | None = None, body: object = None):
        self.status = status
        self.code = code or "error"
        self.message = message or f"HTTP {status}"
        self.fields = fields or {}
        self.request_id = request_id
        self.retry_after = retry_after
        self.body = body
        super().__init__(self._text())

    def _text(self) -> str:
        text = f"{self.status} {self.code}: {self.message}"
        if self.fields:
            text += " " + "; ".join(f"{path}: {msg}" for path, msg in field_errors(self.fields))
        if self.request_id:
            text += f" (request {self.request_id})"
        return text


def field_errors(fields: dict, prefix: str = "") -> list[tuple[str, str]]:
    """The API's ``fields`` as (dotted path, message) pairs: ``{"budget": {"max_recal_chars":
    ["Unknown field."]}}`` is ``("budget.max_recal_chars", "Unknown field.")``, not a dict's repr."""
    out: list[tuple[str, str]] = []
    for key, value in fields.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            out += field_errors(value, path)
        elif isinstance(value, list) and any(isinstance(v, dict) for v in value):
            for i, v in enumerate(value):
                if isinstance(v, dict):
                    out += field_errors(v, f"{path}.{i}")
                elif v:
                    out.append((f"{path}.{i}", str(v)))
        elif isinstance(value, list):
            out.append((path, " ".join(str(v) for v in value)))
        else:
            out.append((path, str(value)))
    return out


class ValidationError(APIError):
    """400: the input was refused; ``fields`` maps each field to its messages."""


class AuthError(APIError):
    """401: missing, invalid or revoked API key."""


class PermissionDenied(APIError):
    """403: authenticated, but not allowed (e.g. a read-only key writing)."""


class NotFound(APIError):
    """404: no such object (objects of another organisation are 404 too)."""


class EndpointUnavailable(NotFound):
    """404 for a URL the server has no route for (code ``no_endpoint``, or no error shape at all
    from older servers): this server does not offer the endpoint."""


class ConflictError(APIError):
    """409: the object changed, or the request conflicts with its state."""


class PayloadTooLarge(APIError):
    """413: the request body exceeds the server's limit."""


class RateLimited(APIError):
    """429: too many requests; ``retry_after`` is the server's wait in seconds (if given)."""


class ServerError(APIError):
    """5xx: the service failed or is unavailable."""


_BY_STATUS = {400: ValidationError, 401: AuthError, 403: PermissionDenied, 404: NotFound, 409: ConflictError,
              413: PayloadTooLarge, 429: RateLimited}


def error_for(status: int, body: object, *, retry_after: float | None = None) -> APIError:
    """The exception for an error response (``body`` is the decoded JSON, or text)."""
    shaped = isinstance(body, dict) and isinstance(body.get("error"), dict)
    err = body["error"] if shaped else {}
    if status == 404 and (not shaped or err.get("code") == "no_endpoint"):
        cls: type[APIError] = EndpointUnavailable
    elif status >= 500:
        cls = ServerError
    else:
        cls = _BY_STATUS.get(status, APIError)
    message = str(err.get("message", "")) if shaped else (body[:200] if isinstance(body, str) else "")
    fields = err.get("fields") if shaped and isinstance(err.get("fields"), dict) else {}
    return cls(status, code=str(err.get("code", "")) if shaped else "", message=message, fields=fields,
               request_id=str(body.get("request_id", "")) if isinstance(body, dict) else "",
               retry_after=retry_after, body=body)
