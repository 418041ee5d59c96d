"""Shared API building blocks: strict input serializers and the base API view."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.views import APIView


class StrictSerializer(serializers.Serializer):
    """Rejects unknown fields: a typo in a field name must not be silently ignored."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = set(data) - set(self.fields)
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in sorted(unknown)})
        return super().to_internal_value(data)


class Api(APIView):
    """Base view: small typed views, the actor is always ``request.actor``."""

    def request_id(self) -> str:
        return getattr(self.request._request, "request_id", "")


def paginate(view: APIView, qs, serializer_cls, **serializer_kwargs):
    """One keyset page of ``qs`` serialised, with next/previous cursors."""
    from .pagination import CursorPage

    paginator = CursorPage()
    page = paginator.paginate_queryset(qs, view.request, view=view)
    return paginator.get_paginated_response(serializer_cls(page, many=True, **serializer_kwargs).data)


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
