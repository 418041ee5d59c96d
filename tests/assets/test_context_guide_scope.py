"""The context bundle's tool guide names memory_weave only for a key that may write: a model told
about a tool calls it, and a read-only key's call would only be refused."""

from __future__ import annotations

import pytest

from teams import services
from teams.models import Scope

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("language", ["en", "fr", "de", "zh", "es"])
def test_the_guide_names_memory_weave_only_for_a_key_that_may_write(world, client_for, language):
    a = world["a"]
    _, reader = services.api_key_create(actor=None, agent=a.agent, name="reader", scopes=[Scope.READ])
    texts = {}
    for name, key in (("writer", a.key), ("reader", reader)):
        r = client_for(key).get("/api/v1/context", HTTP_ACCEPT_LANGUAGE=language)
        assert r.status_code == 200, r.content
        texts[name] = r.json()["stable"]
    assert "memory_weave(" in texts["writer"] and "memory_resonate(" in texts["writer"]
    assert "memory_weave" not in texts["reader"] and "memory_resonate(" in texts["reader"]
    assert r.json()["language"] == language
