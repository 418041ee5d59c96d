"""The asyncio client: the same methods as ``Client``, each a coroutine."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

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


class AsyncClient(Endpoints):
    """``AsyncClient(url, api_key)``: the methods of ``Client``, each a coroutine; the same
    ``timeout``, ``max_retries`` and ``max_retry_wait`` (default 65 seconds)."""

    def __init__(self, url: str = "http://127.0.0.1:8000", api_key: str | None = None, *, timeout: float = 30.0,
                 max_retries: int = 3, backoff: float = 0.5, max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT,
                 headers: dict | None = None, transport: httpx.AsyncBaseTransport | None = None):
        self.retry = RetryPolicy(max_retries=max_retries, backoff=backoff, max_wait=max_retry_wait)
        self._sleep = asyncio.sleep
        self._http = httpx.AsyncClient(base_url=url.rstrip("/"), timeout=timeout, transport=transport,
                                       headers=client_headers(api_key, headers))

    async def _call(self, call: Call):
        attempt = 0
        while True:
            response = None
            try:
                response = await self._http.request(call.method, call.path, json=call.json, params=call.params,
                                                    headers=call.headers)
            except httpx.TransportError as exc:
                wait = retry_wait(self.retry, attempt, exc)
                if wait is None:
                    raise transport_error(exc) from exc
            else:
                wait = retry_wait(self.retry, attempt, response)
                if wait is None:
                    return result_or_raise(call, response)
            await self._sleep(wait)
            attempt += 1

    async def _pages(self, fetch, **kw) -> AsyncIterator:
        cursor = None
        while True:
            page = await fetch(cursor=cursor, **kw)
            for item in page.items:
                yield item
            cursor = page.next_cursor
            if not cursor:
                return

    def iter_nodes(self, *, kind: str | None = None, session_key: str | None = None,
                   page_size: int = 100) -> AsyncIterator[Node]:
        return self._pages(self.list_nodes, kind=kind, session_key=session_key, limit=page_size)

    def iter_conflicts(self, *, status: str | None = None, page_size: int = 100) -> AsyncIterator[Conflict]:
        return self._pages(self.list_conflicts, status=status, limit=page_size)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()
