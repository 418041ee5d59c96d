"""A visit to a console address that only takes a form's POST answers 405 with a page saying so (it
was an empty body, which browsers show as their own blank error); the API keeps its JSON."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_a_visit_to_a_post_only_address_gets_a_page(world, login):
    r = login(world["a"].admin).get("/console/memories/1/delete")
    assert r.status_code == 405 and "POST" in r["Allow"]
    body = r.content.decode()
    assert "Not a page" in body and "Nothing was changed" in body
    r = login(world["a"].admin).get("/logout/")
    assert r.status_code == 405 and "Not a page" in r.content.decode()


def test_the_api_keeps_its_own_405(world, client_for):
    r = client_for(world["a"].key).get("/api/v1/memories/resonate")
    assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed"
