"""GET /api/v1/ping: the authenticated no-op the write benchmarks compare against."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_ping_answers_authenticated_callers_only(world, client_for):
    assert client_for(world["a"].key).get("/api/v1/ping").json() == {"ok": True}
    assert client_for(world["a"].member).get("/api/v1/ping").status_code == 200
    assert client_for(None).get("/api/v1/ping").status_code in (401, 403)
    assert client_for("nyl_nope_secret").get("/api/v1/ping").status_code == 401
    assert client_for(world["outsider"]).get("/api/v1/ping").status_code == 403
