"""Shared API building blocks: strict input serializers and the base API view."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.views import APIView

from .parsers import JsonObject, unstorable_text

UNSTORABLE = "NUL characters and unpaired surrogates are not allowed."


class StrictSerializer(serializers.Serializer):
    """Rejects unknown fields: a typo in a field name must not be silently ignored. In a JSON body
    it also rejects values of the wrong JSON type, which DRF would coerce (5 for a string, "5" for
    an integer, "yes" for a boolean): the OpenAPI schema promises the types. Objects parsed from a
    JSON body are ``JsonObject``s; a query string's values are all strings and are left to DRF."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            errors: dict[str, list] = {name: ["Unknown field."] for name in sorted(set(data) - set(self.fields))}
            if isinstance(data, JsonObject):
                errors |= {name: [f"Expected {_json_type(field)}."] for name, field in self.fields.items()
                           if name in data and not _json_type_ok(field, data[name])}
            if errors:
                # The other fields' errors too ({"txt": …} said only "txt: Unknown field.", not that
                # "text" is required), read without the fields already refused.
                rest = {k: v for k, v in data.items() if k not in errors}
                try:
                    super().to_internal_value(rest)
                except serializers.ValidationError as exc:
                    if isinstance(exc.detail, dict):
                        errors = {**exc.detail, **errors}
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


class StrictPatchSerializer(StrictSerializer):
    """A PATCH body whose fields say themselves which are required (``expected_version``), for the
    schema too: drf-spectacular marks a PATCH body "partial" and drops every required field, but
    these views never validate partially, so a body without them is a 400 the schema must show."""

    partial = property(lambda self: False, lambda self, value: None)


def _json_type(field) -> str:
    if isinstance(field, serializers.BooleanField):
        return "a boolean"
    if isinstance(field, serializers.IntegerField):
        return "an integer"
    if isinstance(field, serializers.FloatField):
        return "a number"
    if isinstance(field, serializers.ListField):
        return "a list"
    if isinstance(field, serializers.DictField):
        return "an object"
    return "a string"


def _json_type_ok(field, value) -> bool:
    """Whether a parsed JSON value has the JSON type the field documents (null is left to allow_null;
    nested serializers check their own fields)."""
    if value is None:
        return True
    if isinstance(field, serializers.BooleanField):
        return isinstance(value, bool)
    if isinstance(field, serializers.IntegerField):
        return (isinstance(value, int) or (isinstance(value, float) and value.is_integer())) \
            and not isinstance(value, bool)
    if isinstance(field, serializers.FloatField):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(field, serializers.CharField | serializers.DateTimeField):
        return isinstance(value, str)
    if isinstance(field, serializers.ListField):
        return isinstance(value, list) and all(_json_type_ok(field.child, v) for v in value)
    if isinstance(field, serializers.DictField):
        return isinstance(value, dict) and all(_json_type_ok(field.child, v) for v in value.values())
    return True


class Api(APIView):
    """Base view: small typed views, the actor is always ``request.actor``."""

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        path = getattr(exc, "field_path", None)
        error = response.data.get("error") if isinstance(response.data, dict) else None
        if path and isinstance(error, dict):
            error["fields"] = {path: [UNSTORABLE]}
        return response

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)  # authentication, permissions, throttles first
        # Query values reach SQL filters; Postgres text holds no NUL, so such a value is a 400 here.
        bad = sorted({k for k, values in request.query_params.lists() for v in [k, *values] if unstorable_text(v)})
        if bad:
            raise serializers.ValidationError({k: ["NUL characters are not allowed."] for k in bad})
        if request.method in ("GET", "HEAD") and request.query_params and not _reads_query(self):
            # A view that takes no query parameter (a detail, /org, /ping, the status pages): a
            # misspelt filter must not look as if it had been applied, as on the lists.
            raise serializers.ValidationError({k: ["Unknown field."] for k in sorted(request.query_params)})

    def request_id(self) -> str:
        return getattr(self.request._request, "request_id", "")


def _reads_query(view: APIView) -> bool:
    """Whether the view's GET checks its own query parameters: a strict ``QueryInput`` or
    ``QuerySerializer``, or a paginated list (``paginate`` refuses what it does not take)."""
    return any(getattr(view, name, None) is not None for name in ("QueryInput", "QuerySerializer", "pagination_class"))


def paginate(view: APIView, qs, serializer_cls, **serializer_kwargs):
    """One keyset page of ``qs`` serialised, with next/previous cursors.

    The view declares ``pagination_class = CursorPage``: that is what makes its OpenAPI schema
    document the page (``{next, previous, results}``) and the ``cursor``/``limit`` parameters.
    A list with filters checks them with its strict ``QueryInput``; one without takes only the
    paging parameters, and any other is refused the same way (a misspelt ``?kind=`` on a list that
    has no filter must not look like a filtered answer)."""
    pagination_class = getattr(view, "pagination_class", None)
    if pagination_class is None:
        raise TypeError(f"{type(view).__name__} paginates: declare pagination_class = CursorPage on it.")
    if getattr(view, "QueryInput", None) is None:
        StrictSerializer(data=filter_params(view.request)).is_valid(raise_exception=True)
    paginator = pagination_class()
    page = paginator.paginate_queryset(qs, view.request, view=view)
    return paginator.get_paginated_response(serializer_cls(page, many=True, **serializer_kwargs).data)


def filter_params(request) -> dict[str, str]:
    """The query parameters of a list request less the paginator's (``cursor``, ``limit``), for a
    strict filter serializer."""
    from .pagination import CursorPage

    paging = {CursorPage.cursor_query_param, CursorPage.page_size_query_param}
    return {k: v for k, v in request.query_params.dict().items() if k not in paging}


def team_from_input(actor, team_id: int | None):
    """A ``team_id`` field of a request body: None, or a team of the actor's org (else a 400)."""
    if team_id is None:
        return None
    from django.http import Http404

    from teams.access import access_team_by_id

    try:
        return access_team_by_id(actor, team_id, for_write=False)
    except Http404:
        raise serializers.ValidationError({"team_id": ["No such team."]}) from None
