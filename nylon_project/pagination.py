from __future__ import annotations

from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination

MAX_ID = 2**63 - 1


class CursorPage(CursorPagination):
    """Keyset pagination: constant cost per page even at 100k rows."""

    ordering = "-id"
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 500

    def get_page_size(self, request) -> int:
        """``limit`` is a whole number from 1 to ``max_page_size``; anything else is a 400 (DRF would
        quietly fall back to the default page)."""
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        if not (raw.isascii() and raw.isdigit() and 1 <= int(raw) <= self.max_page_size):
            raise ValidationError({self.page_size_query_param: [f"A whole number from 1 to {self.max_page_size}."]})
        return int(raw)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for p in parameters:
            if p["name"] == self.page_size_query_param:
                p["schema"] = {"type": "integer", "minimum": 1, "maximum": self.max_page_size,
                               "default": self.page_size}
        return parameters

    def decode_cursor(self, request):
        """A cursor that is not one we issued is a 400 on ``cursor`` (DRF would answer 404), and its
        position must be an id: it goes into ``id < position`` and a non-number would fail there."""
        try:
            cursor = super().decode_cursor(request)
        except NotFound:
            cursor = None
            valid = False
        else:
            valid = cursor is None or cursor.position is None or _is_id(cursor.position)
        if not valid:
            raise ValidationError({self.cursor_query_param: ["Invalid cursor."]})
        return cursor


def _is_id(value: str) -> bool:
    return value.isascii() and value.isdigit() and int(value) <= MAX_ID
