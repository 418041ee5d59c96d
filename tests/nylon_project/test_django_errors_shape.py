"""Errors Django answers itself (before or outside DRF) keep the one error shape under /api/."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.test import RequestFactory
from django.urls import get_resolver

pytestmark = pytest.mark.django_db


def test_disallowed_host_under_api_is_the_error_shape(client):
    r = client.get("/api/v1/teams", HTTP_HOST="evil.example", HTTP_X_REQUEST_ID="rid-400")
    assert r.status_code == 400
    body = r.json()
    assert body["error"]["code"] == "bad_request"
    assert body["request_id"] == "rid-400"


def test_permission_denied_outside_drf_under_api_is_the_error_shape():
    request = RequestFactory().get("/api/v1/anything")
    request.request_id = "rid-403"
    r = get_resolver().resolve_error_handler(403)(request, PermissionDenied())
    assert r.status_code == 403
    import json

    body = json.loads(r.content)
    assert body["error"]["code"] == "permission_denied" and body["request_id"] == "rid-403"


def test_non_api_400_keeps_django_page():
    request = RequestFactory().get("/console/")
    r = get_resolver().resolve_error_handler(400)(request, Exception())
    assert r.status_code == 400 and not r["Content-Type"].startswith("application/json")
