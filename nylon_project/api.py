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
