"""A body sent without Content-Length (chunked) is held to NYLON_MAX_BODY_BYTES too."""

from __future__ import annotations

import io
import json

from django.core.handlers.asgi import ASGIRequest
from django.http import HttpResponse
from django.test import override_settings

from nylon_project.middleware import BodySizeLimitMiddleware


def _request(body: bytes, headers=()) -> ASGIRequest:
    scope = {"type": "http", "method": "POST", "path": "/api/v1/teams", "query_string": b"",
             "headers": [(b"content-type", b"application/json"), *headers], "server": ("testserver", 80)}
    req = ASGIRequest(scope, io.BytesIO(body))
    req.request_id = "rid-chunked"
    return req


def test_chunked_oversize_body_is_413():
    mw = BodySizeLimitMiddleware(lambda r: HttpResponse("ok"))
    with override_settings(NYLON_MAX_BODY_BYTES=1000):
        r = mw(_request(json.dumps({"name": "x" * 5000}).encode(), [(b"transfer-encoding", b"chunked")]))
    assert r.status_code == 413
    assert json.loads(r.content)["error"]["code"] == "payload_too_large"


def test_chunked_small_body_passes_and_stays_readable():
    seen = {}

    def view(r):
        seen["body"] = r.body
        return HttpResponse("ok")

    with override_settings(NYLON_MAX_BODY_BYTES=1000):
        r = BodySizeLimitMiddleware(view)(_request(b'{"name": "x"}'))
    assert r.status_code == 200 and seen["body"] == b'{"name": "x"}'
