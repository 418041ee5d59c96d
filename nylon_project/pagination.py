from __future__ import annotations

from rest_framework.pagination import CursorPagination


class CursorPage(CursorPagination):
    """Keyset pagination: constant cost per page even at 100k rows."""

    ordering = "-id"
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 500
