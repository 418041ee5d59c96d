"""A key refused for its scope is told which scope it lacks (first-user audit: a read-only key writing
got "This key lacks the scope for this request." and no word of which)."""

from __future__ import annotations

import pytest

from memory.models import Node
from teams import services
from teams.models import Scope

pytestmark = pytest.mark.django_db


def _key(world, scopes) -> str:
    return services.api_key_create(actor=None, agent=world["a"].agent, scopes=scopes)[1]


def test_a_read_only_key_writing_is_told_it_lacks_write(world, client_for):
    r = client_for(_key(world, [Scope.READ])).post("/api/v1/memories/weave", {"text": "hello"}, format="json")
    assert r.status_code == 403, r.content
    message = r.json()["error"]["message"]
    assert message.startswith("This key lacks the `write` scope for this request")
    assert "its scopes: `read`" in message
    assert not Node.objects.exists()


def test_a_write_only_key_reading_is_told_it_lacks_read(world, client_for):
    r = client_for(_key(world, [Scope.WRITE])).post("/api/v1/memories/resonate", {"query": "hello"}, format="json")
    assert r.status_code == 403, r.content
    assert "lacks the `read` scope" in r.json()["error"]["message"]
    assert "its scopes: `write`" in r.json()["error"]["message"]
