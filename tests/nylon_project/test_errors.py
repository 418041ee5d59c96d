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


def test_every_error_path_answers_the_one_shape(world, client_for):
    """DRF's handler, the body-size middleware, URL-level 404s and the proxy build their answers
    with ``nylon_project.errors.error_body``: the same keys, and the request's id."""
    from django.test import Client

    owner = client_for(world["a"].owner)
    answers = {
        "invalid": owner.post("/api/v1/teams", {}, format="json", HTTP_X_REQUEST_ID="rid-1"),
        "not_found": owner.get("/api/v1/teams/999999", HTTP_X_REQUEST_ID="rid-2"),
        "no_endpoint": owner.get("/api/v1/no-such-thing", HTTP_X_REQUEST_ID="rid-3"),
        "not_authenticated": Client().post("/proxy/openai/v1/chat/completions", "{}",
                                           content_type="application/json", HTTP_X_REQUEST_ID="rid-4"),
    }
    with override_settings(NYLON_MAX_BODY_BYTES=10):
        answers["payload_too_large"] = owner.post("/api/v1/teams", {"name": "x" * 50}, format="json",
                                                  HTTP_X_REQUEST_ID="rid-5")
    for code, r in answers.items():
        body = r.json()
        assert set(body) == {"error", "request_id"}, code
        assert set(body["error"]) == {"code", "message", "fields"}, code
        assert body["error"]["code"] == code and body["request_id"] == r["X-Request-Id"], code
        assert isinstance(body["error"]["message"], str) and body["error"]["message"], code
    assert answers["invalid"].json()["error"]["fields"]["name"]
    assert all(r.json()["error"]["fields"] == {} for c, r in answers.items() if c != "invalid")
