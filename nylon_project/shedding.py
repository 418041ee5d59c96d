"""Load shedding in front of the HTTP app: past ``NYLON_WEB_MAX_INFLIGHT`` requests in flight in
this process, a request is answered 503 + Retry-After at once instead of queueing.

Why: beyond its plateau one web process queued every request (a thread each), they waited the
database pool's timeout and most were then refused anyway; the achieved rate fell from ~8 to
~4.6 req/s at three times the load (docs/benchmarks.md, Load). Refusing early keeps the work done
for requests that can still be answered in time. /healthz is never shed, so monitoring sees a
busy process as alive, and the model proxy's /proxy/ streams are not counted: they live for the
length of an upstream model's answer, mostly waiting on it, not on this process.
"""

from __future__ import annotations

import json
import logging

log = logging.getLogger("nylon.shedding")

EXEMPT = ("/healthz",)
EXEMPT_PREFIXES = ("/proxy/",)


class LoadShedder:
    """ASGI middleware. The counter lives on the event loop (one per process), so no lock."""

    def __init__(self, app, limit: int):
        self.app = app
        self.limit = int(limit)
        self.inflight = 0
        self.shed = 0

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "")
        if scope["type"] != "http" or self.limit <= 0 or path in EXEMPT or path.startswith(EXEMPT_PREFIXES):
            return await self.app(scope, receive, send)
        if self.inflight >= self.limit:
            self.shed += 1
            if self.shed == 1 or self.shed % 100 == 0:
                log.warning("shedding load: %d requests in flight (limit %d), %d refused so far",
                            self.inflight, self.limit, self.shed)
            return await _busy(scope, send, self.limit)
        self.inflight += 1
        try:
            return await self.app(scope, receive, send)
        finally:
            self.inflight -= 1


async def _busy(scope, send, limit: int) -> None:
    """The API's error shape with a request id (the caller's X-Request-Id when safe), like every
    other error, answered before Django sees the request."""
    from .errors import error_body
    from .middleware import request_id_for

    incoming = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
    rid = request_id_for(incoming)
    body = json.dumps(error_body("overloaded", f"This server has {limit} requests in flight; retry shortly.",
                                 request_id=rid)).encode()
    await send({"type": "http.response.start", "status": 503,
                "headers": [(b"content-type", b"application/json"), (b"retry-after", b"1"),
                            (b"x-request-id", rid.encode()), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
