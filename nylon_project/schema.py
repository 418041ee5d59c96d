"""The OpenAPI schema as the API really behaves: unique component names, the agent-key and session
security schemes, and the error responses every operation can give in the one error shape
(``nylon_project.errors``). ``bench/fuzz_api.py`` and ``tests/nylon_project/test_fuzz.py`` hold the
service to it."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import force_instance
from rest_framework import serializers

from .api import StrictSerializer


class ErrorDetail(serializers.Serializer):
    code = serializers.CharField(help_text="Machine-readable: invalid, not_found, permission_denied, throttled, …")
    message = serializers.CharField()
    fields = serializers.DictField(help_text="Per-field messages of a validation error (empty otherwise).")


class ErrorResponse(serializers.Serializer):
    error = ErrorDetail()
    request_id = serializers.CharField(required=False, help_text="Also in the X-Request-Id header.")


ERROR_DESCRIPTIONS = {
    "400": "Invalid input: malformed JSON or cursor, unknown or invalid fields (see error.fields).",
    "401": "Missing, invalid or revoked API key.",
    "403": "The key lacks the scope, or the actor the right, for this request.",
    "404": "No such object in your organisation.",
    "409": "The object changed since you read it (optimistic locking).",
    "413": "Request body too large.",
    "429": "Too many requests for this key; retry after Retry-After seconds.",
    "503": "The database is unavailable or busy; retry after Retry-After seconds.",
}


class NylonAutoSchema(AutoSchema):
    # Errors every operation can answer: authentication, scope/role, an unknown X-Nylon-Org, the
    # body-size limit, the per-actor throttle and a database outage (nylon_project.errors).
    common_errors = ("401", "403", "404", "413", "429", "503")

    def get_serializer_name(self, serializer, direction) -> str:
        """Nested ``<View>Api.InputSerializer`` classes are named after their view, so two views'
        ``InputSerializer`` never collapse into one component."""
        qualname = type(serializer).__qualname__
        outer, _, inner = qualname.rpartition(".")
        if not outer:
            return type(serializer).__name__
        view = outer.rsplit(".", 1)[-1].removesuffix("Api")
        return view + inner.removesuffix("Serializer")

    def _map_serializer(self, serializer, direction, bypass_extensions=False):
        """A StrictSerializer refuses unknown fields with a 400: the schema says so."""
        schema = super()._map_serializer(serializer, direction, bypass_extensions)
        if direction == "request" and isinstance(force_instance(serializer), StrictSerializer) and schema.get("type") == "object":
            schema["additionalProperties"] = False
        return schema

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        codes = list(self.common_errors)
        if self._has_input():
            codes.append("400")
        for code in sorted(codes):
            if code in responses:
                continue
            body = self._get_response_for_code(ErrorResponse, code, direction=direction)
            body["description"] = ERROR_DESCRIPTIONS[code]
            responses[code] = body
        for code, body in responses.items():
            if code in ERROR_DESCRIPTIONS and not body.get("description"):
                body["description"] = ERROR_DESCRIPTIONS[code]
        for code in ("429", "503"):
            responses[code].setdefault("headers", {})["Retry-After"] = {
                "schema": {"type": "integer", "minimum": 0},
                "description": "Seconds to wait before retrying.",
            }
        return responses

    def _has_input(self) -> bool:
        # a body, parameters, or a business rule refused by a service (e.g. removing the last owner)
        if self.method in ("POST", "PUT", "PATCH", "DELETE"):
            return True
        return bool(self._get_pagination_parameters() or self.get_override_parameters())


class NylonAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "teams.auth.NylonAuthentication"
    name = ["agentKey", "agentKeyHeader", "consoleSession"]

    def get_security_definition(self, auto_schema):
        return [
            {"type": "http", "scheme": "bearer", "bearerFormat": "nyl_<prefix>_<secret>",
             "description": "An agent API key: Authorization: Bearer nyl_…"},
            {"type": "apiKey", "in": "header", "name": "X-Api-Key", "description": "The same key in X-Api-Key."},
            {"type": "apiKey", "in": "cookie", "name": settings.SESSION_COOKIE_NAME,
             "description": "A console session (choose the org with X-Nylon-Org)."},
        ]

    def get_security_requirement(self, auto_schema):
        return [{"agentKey": []}, {"agentKeyHeader": []}, {"consoleSession": []}]
