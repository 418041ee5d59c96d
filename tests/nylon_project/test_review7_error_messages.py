"""Error messages that name what is wrong: a budget value that is not a whole number is named by its
key (it read "Expected an object."), unstorable text in a body is under error.fields at its path (it
was only inside the message, fields {}), and an empty JSON-lines body to bulk says what an empty array
says."""

from __future__ import annotations

import json

import pytest

from memory.models import Node

pytestmark = pytest.mark.django_db

CONTEXT = "/api/v1/context"
WEAVE = "/api/v1/memories/weave-session"
BULK = "/api/v1/memories/bulk"


@pytest.mark.parametrize("value", [True, 1.5, "5"])
def test_a_budget_value_that_is_not_a_whole_number_is_named(world, client_for, value):
    r = client_for(world["a"].key).post(CONTEXT, {"budget": {"max_recall_items": value}}, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["error"]["fields"] == {"budget": {"max_recall_items": ["Expected an integer."]}}


def test_budget_keys_are_checked_one_by_one(world, client_for):
    c = client_for(world["a"].key)
    r = c.post(CONTEXT, {"budget": {"nope": 1, "max_stable_chars": 100}}, format="json")
    assert r.status_code == 400 and r.json()["error"]["fields"] == {"budget": {"nope": ["Unknown field."]}}
    r = c.post(CONTEXT, {"budget": {"max_recall_items": 0}}, format="json")
    assert r.status_code == 400 and list(r.json()["error"]["fields"]["budget"]) == ["max_recall_items"]
    r = c.post(CONTEXT, {"budget": {"max_recall_items": 3.0, "max_stable_chars": 10**9}}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["budget"]["max_recall_items"] == 3 and r.json()["budget"]["max_stable_chars"] == 60000


def _raw(client, url, body: str, content_type: str = "application/json"):
    return client.post(url, body.encode(), content_type=content_type)


@pytest.mark.parametrize(("turn", "path"), [
    ('{"text": "nul \\u0000 inside"}', "turns[0].text"),
    ('{"text": "half \\ud83d a pair"}', "turns[0].text"),
    ('{"text": "ok", "metadata": {"k": ["fine", "nul\\u0000"]}}', "turns[0].metadata.k[1]"),
])
def test_unstorable_text_is_under_fields_at_its_path(world, client_for, turn, path):
    r = _raw(client_for(world["a"].key), WEAVE, '{"session_key": "s", "turns": [' + turn + "]}")
    assert r.status_code == 400, r.content
    err = r.json()["error"]
    assert err["fields"] == {path: ["NUL characters and unpaired surrogates are not allowed."]}
    assert err["code"] == "parse_error" and err["message"].startswith(path + ":")
    assert not Node.objects.exists()


def test_unstorable_text_in_bulk_is_at_the_session_index(world, client_for):
    c = client_for(world["a"].key)
    good = json.dumps({"session_key": "ok", "turns": [{"text": "fine"}]})
    bad = json.dumps({"session_key": "s", "turns": [{"text": "a\u0000b"}]})
    r = _raw(c, BULK, f"{good}\n\n{bad}\n", "application/x-ndjson")
    assert r.status_code == 400, r.content
    assert r.json()["error"]["fields"] == {"[1].turns[0].text": ["NUL characters and unpaired surrogates are not "
                                                                 "allowed."]}
    assert r.json()["error"]["message"].startswith("Line 3:")
    r = _raw(c, BULK, f"[{good}, {bad}]")
    assert r.json()["error"]["fields"] == {"[1].turns[0].text": ["NUL characters and unpaired surrogates are not "
                                                                 "allowed."]}


def test_other_parse_errors_keep_fields_empty(world, client_for):
    r = _raw(client_for(world["a"].key), WEAVE, '"a\\u0000b"')
    assert r.status_code == 400 and r.json()["error"]["fields"] == {}
    r = _raw(client_for(world["a"].key), WEAVE, "{not json")
    assert r.status_code == 400 and r.json()["error"]["fields"] == {}


@pytest.mark.parametrize(("body", "content_type"), [
    ("", "application/x-ndjson"), ("\n\n", "application/x-ndjson"), ("[]", "application/json"),
    ("", "application/json"),
])
def test_an_empty_bulk_body_says_no_session_was_given(world, client_for, body, content_type):
    r = _raw(client_for(world["a"].key), BULK, body, content_type)
    assert r.status_code == 400, r.content
    assert r.json()["error"]["fields"] == {"sessions": ["At least one session is required."]}
