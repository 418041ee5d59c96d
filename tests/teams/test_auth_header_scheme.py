"""``Authorization: nyl_…`` (the key without "Bearer ") was answered 401 "Authentication credentials
were not provided.", as if no header had been sent. A present Authorization header that is not a
Bearer token now gets a 401 saying how to send the key; the challenge header stays."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def _get(**headers):
    return APIClient().get("/api/v1/org", **headers)


def test_a_key_without_the_bearer_scheme_is_told_how_to_send_it(world):
    key = world["a"].key
    r = _get(HTTP_AUTHORIZATION=key)
    assert r.status_code == 401
    err = r.json()["error"]
    assert err["code"] == "not_authenticated"
    assert "Authorization: Bearer <key>" in err["message"] and "X-Api-Key" in err["message"]
    assert "without its scheme" in err["message"]
    assert key not in r.content.decode()  # never echoed
    assert r["WWW-Authenticate"] == 'Bearer realm="nylon"'


@pytest.mark.parametrize("value", ["Token abc", "Basic YWxhZGRpbjpvcGVuc2VzYW1l", "nope"])
def test_another_scheme_is_told_the_header_must_be_bearer(world, value):
    r = _get(HTTP_AUTHORIZATION=value)
    assert r.status_code == 401 and r["WWW-Authenticate"] == 'Bearer realm="nylon"'
    assert "must be 'Authorization: Bearer <key>'" in r.json()["error"]["message"]


def test_other_requests_are_answered_as_before(world):
    key = world["a"].key
    assert _get(HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 200
    assert _get(HTTP_AUTHORIZATION=f"bearer {key}").status_code == 200
    assert _get(HTTP_X_API_KEY=key).status_code == 200
    r = _get()  # no credentials at all
    assert r.status_code == 401 and r.json()["error"]["message"] == "Authentication credentials were not provided."
    assert r["WWW-Authenticate"] == 'Bearer realm="nylon"'
    r = _get(HTTP_AUTHORIZATION="Bearer nyl_abc_wrong")
    assert r.status_code == 401 and r.json()["error"]["message"] == "Invalid or revoked API key."
    # a console session still authenticates behind a proxy that adds its own Authorization header
    c = APIClient()
    c.force_login(world["a"].member)
    assert c.get("/api/v1/org", HTTP_AUTHORIZATION="Basic YWxhZGRpbjpvcGVuc2VzYW1l").status_code == 200


def test_an_agent_key_with_another_orgs_header_is_told_instead_of_served_in_its_own(world):
    """X-Nylon-Org naming another org beside an agent key was ignored: the request was served in the
    key's org, so a client that believed it wrote to the other org never knew."""
    a, b = world["a"], world["b"]
    r = _get(HTTP_AUTHORIZATION=f"Bearer {a.key}", HTTP_X_NYLON_ORG=b.org.slug)
    assert r.status_code == 400
    err = r.json()["error"]
    assert "X-Nylon-Org" in err["fields"] and a.org.slug in err["fields"]["X-Nylon-Org"][0]
    # its own org's slug is no contradiction
    assert _get(HTTP_AUTHORIZATION=f"Bearer {a.key}", HTTP_X_NYLON_ORG=a.org.slug).status_code == 200
