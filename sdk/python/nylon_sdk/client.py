"""The synchronous client."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx

from ._core import (
    DEFAULT_MAX_RETRY_WAIT,
    Call,
    Endpoints,
    RetryPolicy,
    client_headers,
    result_or_raise,
    retry_wait,
    transport_error,
)
from .types import Conflict, Node


class Client(Endpoints):
    """``Client(url, api_key)``: every API call as a method returning typed results.

    ``timeout`` (seconds) bounds each attempt; ``max_retries`` retries 429/503 answers and
    connection failures, waiting ``Retry-After`` when the server says how long. A ``Retry-After``
    longer than ``max_retry_wait`` seconds (default 65, past a per-minute rate limit's 60) is not
    waited: the error is raised at once, its ``retry_after`` saying how long the server asked for."""

    def __init__(self, url: str = "http://127.0.0.1:8000", api_key: str | None = None, *, timeout: float = 30.0,
                 max_retries: int = 3, backoff: float = 0.5, max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT,
                 headers: dict | None = None, transport: httpx.BaseTransport | None = None):
        self.retry = RetryPolicy(max_retries=max_retries, backoff=backoff, max_wait=max_retry_wait)
        self._sleep = time.sleep
        self._http = httpx.Client(base_url=url.rstrip("/"), timeout=timeout, transport=transport,
                                  headers=client_headers(api_key, headers))

    def _call(self, call: Call):
        attempt = 0
        while True:
            response = None
            try:
                response = self._http.request(call.method, call.path, json=call.json, params=call.params,
                                              headers=call.headers)
            except httpx.TransportError as exc:
                wait = retry_wait(self.retry, attempt, exc)
                if wait is None:
                    raise transport_error(exc) from exc
            else:
                wait = retry_wait(self.retry, attempt, response)
                if wait is None:
                    return result_or_raise(call, response)
            self._sleep(wait)
            attempt += 1

    def _pages(self, fetch, **kw) -> Iterator:
        cursor = None
        while True:
            page = fetch(cursor=cursor, **kw)
            yield from page.items
            cursor = page.next_cursor
            if not cursor:
                return

    def iter_nodes(self, *, kind: str | None = None, session_key: str | None = None,
                   page_size: int = 100) -> Iterator[Node]:
        """Every visible node, following the cursor pages."""
        return self._pages(self.list_nodes, kind=kind, session_key=session_key, limit=page_size)

    def iter_conflicts(self, *, status: str | None = None, page_size: int = 100) -> Iterator[Conflict]:
        return self._pages(self.list_conflicts, status=status, limit=page_size)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
