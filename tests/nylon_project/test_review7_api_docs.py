"""The OpenAPI schema documents every operation: a description of its own (46 of 58 used to inherit
the base view's docstring), PATCH bodies that mark what the server requires, and the context
budget's keys."""

from __future__ import annotations

import inspect

import pytest
from drf_spectacular.generators import SchemaGenerator

from assets.context import Budget
from nylon_project.api import Api

METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture(scope="module")
def schema():
    return SchemaGenerator().get_schema(request=None, public=True)


def _operations(schema):
    for path, item in schema["paths"].items():
        for method in METHODS:
            if method in item:
                yield f"{method.upper()} {path}", item[method]


def test_every_operation_has_its_own_description(schema):
    base = inspect.getdoc(Api)
    ops = dict(_operations(schema))
    assert len(ops) >= 50
    bad = sorted(name for name, op in ops.items() if not op.get("description", "").strip()
                 or op["description"].strip() == base)
    assert not bad, bad
    # Views of one class answer different methods: each method says what it does.
    assert ops["GET /api/v1/assets/{asset_id}"]["description"] != ops["PATCH /api/v1/assets/{asset_id}"]["description"]


def _request_schema(schema, name):
    body = schema["paths"][name.split(" ")[1]][name.split(" ")[0].lower()]["requestBody"]
    ref = body["content"]["application/json"]["schema"]["$ref"]
    return body, schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]


@pytest.mark.parametrize(("op", "required"), [
    ("PATCH /api/v1/assets/{asset_id}", ["expected_version"]),
    ("PATCH /api/v1/org", ["name"]),
    ("PATCH /api/v1/members/{user_id}", ["role"]),
])
def test_patch_bodies_mark_the_fields_the_server_requires(schema, op, required):
    body, component = _request_schema(schema, op)
    assert component.get("required") == required and body.get("required") is True


def test_patching_an_asset_without_expected_version_is_the_400_the_schema_says(world, client_for):
    c = client_for(world["a"].member)
    asset = c.post("/api/v1/assets", {"kind": "wiki", "title": "t"}, format="json").json()
    r = c.patch(f"/api/v1/assets/{asset['id']}", {"title": "u"}, format="json")
    assert r.status_code == 400 and r.json()["error"]["fields"] == {"expected_version": ["This field is required."]}


def test_the_context_budget_keys_are_in_the_schema(schema):
    _, component = _request_schema(schema, "POST /api/v1/context")
    budget = component["properties"]["budget"]
    ref = budget.get("$ref") or budget["allOf"][0]["$ref"]
    props = schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]["properties"]
    assert set(props) == set(Budget.HARD)
    assert all(p["type"] == "integer" and p["minimum"] == 1 and p.get("description") for p in props.values())
