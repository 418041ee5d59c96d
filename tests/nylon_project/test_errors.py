from __future__ import annotations

import json

import pytest
from django.test import override_settings

pytestmark = pytest.mark.django_db


def test_oversize_body_is_413(world, client_for):
    with override_settings(NYLON_MAX_BODY_BYTES=1000):
        r = client_for(world["a"].owner).post("/api/v1/teams", {"name": "x" * 5000}, format="json")
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "payload_too_large"


def test_deep_json_is_400(world, client_for):
    body = "[" * 5000 + "]" * 5000
    r = client_for(world["a"].owner).post("/api/v1/teams", body, content_type="application/json")
    assert r.status_code == 400


def test_invalid_utf8_is_400(world, client_for):
    r = client_for(world["a"].owner).post("/api/v1/teams", b'{"name": "\xff\xfe"}', content_type="application/json")
    assert r.status_code == 400


def test_error_shape_carries_request_id(world, client_for):
    r = client_for(world["a"].owner).post("/api/v1/teams", json.dumps({}), content_type="application/json",
                                          HTTP_X_REQUEST_ID="req-123")
    assert r.status_code == 400
    assert r.json()["request_id"] == "req-123" and r["X-Request-Id"] == "req-123"
    assert r.json()["error"]["fields"]["name"]
