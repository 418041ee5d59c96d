"""Behaviour of the API while a dependency is down, with real clients pointed at nothing: a Redis
outage does not fail API calls (the rate limit fails open), a database outage answers a retryable
503 with Retry-After rather than a 500."""

from __future__ import annotations

import pytest
from django.db import OperationalError
from django.test import override_settings

from nylon_project.errors import exception_handler
from nylon_project.live import free_port

pytestmark = pytest.mark.django_db


def _dead_redis_url() -> str:
    return f"redis://127.0.0.1:{free_port()}/0"  # a port nothing listens on


def test_api_is_served_while_the_rate_limit_cache_is_down(world, client_for):
    dead = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _dead_redis_url()}}
    with override_settings(CACHES=dead):
        c = client_for(world["a"].key)
        r = c.post("/api/v1/memories/weave", {"text": "The release train leaves on Thursdays."}, format="json")
        assert r.status_code == 201, r.content
        r = c.post("/api/v1/memories/resonate", {"query": "release train"}, format="json")
        assert r.status_code == 200, r.content


def test_database_errors_are_a_retryable_503():
    response = exception_handler(OperationalError("connection failed: the database system is starting up"), {})
    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    assert response.data["error"]["code"] == "unavailable"
