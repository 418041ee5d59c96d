"""Abuse: hostile or careless input always gets a clear 4xx in the one error shape, with the field
named where there is one, nothing is written, and text with SQL or LIKE metacharacters is data,
never syntax. Per-key rate limits answer 429 with Retry-After (against a real uvicorn process)."""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from memory.cache import get_cache
from memory.models import Node
from nylon_project.live import start_live_server

pytestmark = pytest.mark.django_db

WEAVE = "/api/v1/memories/weave-session"
RESONATE = "/api/v1/memories/resonate"


def _error(r, status: int) -> dict:
    assert r.status_code == status, r.content
    body = r.json()
    assert set(body["error"]) == {"code", "message", "fields"}, body
    assert body["error"]["message"]
    return body["error"]


def _post_raw(client, path: str, raw: bytes | str):
    return client.generic("POST", path, raw, content_type="application/json")


def _nodes(world) -> int:
    return Node.objects.filter(org=world["a"].org).count()


@pytest.fixture(autouse=True)
def _fresh_cache():
    get_cache().drop()
    yield
    get_cache().drop()


# --- oversize bodies -------------------------------------------------------------------------------


def test_oversize_weave_is_413_and_writes_nothing(world, client_for, settings):
    settings.NYLON_MAX_BODY_BYTES = 10_000
    body = {"session_key": "big", "turns": [{"text": "x" * 5000}] * 3}
    err = _error(client_for(world["a"].key).post(WEAVE, body, format="json"), 413)
    assert err["code"] == "payload_too_large" and "10000 bytes" in err["message"]
    assert _nodes(world) == 0


def test_default_limit_refuses_a_body_one_byte_over_two_mib(world, client_for, settings):
    limit = settings.NYLON_MAX_BODY_BYTES
    assert limit == 2 * 1024 * 1024
    prefix, suffix = '{"session_key": "big", "turns": [{"text": "', '"}]}'
    raw = prefix + "y" * (limit + 1 - len(prefix) - len(suffix)) + suffix
    assert len(raw.encode()) == limit + 1
    _error(_post_raw(client_for(world["a"].key), WEAVE, raw), 413)
    assert _nodes(world) == 0


def test_text_and_turn_caps_are_field_errors(world, client_for):
    c = client_for(world["a"].key)
    err = _error(c.post(WEAVE, {"session_key": "s", "turns": [{"text": "z" * 20_001}]}, format="json"), 400)
    assert "no more than 20000 characters" in err["fields"]["turns"]["0"]["text"][0]
    err = _error(c.post(WEAVE, {"session_key": "s", "turns": [{"text": "hi"}] * 2001}, format="json"), 400)
    assert "turns" in err["fields"]
    err = _error(c.post(RESONATE, {"query": "q" * 4001}, format="json"), 400)
    assert "query" in err["fields"]
    assert _nodes(world) == 0


# --- deep JSON -------------------------------------------------------------------------------------


def _nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def test_deep_json_is_400_and_writes_nothing(world, client_for):
    c = client_for(world["a"].key)
    body = {"session_key": "deep", "turns": [{"text": "hello", "metadata": _nested(100)}]}
    err = _error(_post_raw(c, WEAVE, json.dumps(body)), 400)
    assert err["code"] == "parse_error" and "deeper than 64" in err["message"]
    # deep enough to blow Python's recursion limit if it were ever parsed recursively
    err = _error(_post_raw(c, RESONATE, '{"query": ' + "[" * 100_000 + "]" * 100_000 + "}"), 400)
    assert "deeper than 64" in err["message"]
    assert _nodes(world) == 0
    # nesting inside the limit is ordinary data
    ok = {"session_key": "deep", "turns": [{"text": "hello", "metadata": _nested(20)}]}
    assert _post_raw(c, WEAVE, json.dumps(ok)).status_code == 201


# --- invalid UTF-8, unstorable text, non-JSON numbers ----------------------------------------------


@pytest.mark.parametrize("bad", [b"\xff\xfe", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82", b"caf\xe9"],
                         ids=["bom-like", "overlong", "encoded-surrogate", "truncated", "latin-1"])
def test_invalid_utf8_is_400(world, client_for, bad):
    raw = b'{"session_key": "s", "turns": [{"text": "' + bad + b'"}]}'
    err = _error(_post_raw(client_for(world["a"].key), WEAVE, raw), 400)
    assert "UTF-8" in err["message"]
    assert _nodes(world) == 0


@pytest.mark.parametrize(("turn", "where"), [
    ({"text": "nul \u0000 inside"}, "turns[0].text"),
    ({"text": "ok", "speaker": "a\u0000b"}, "turns[0].speaker"),
    ({"text": "ok", "metadata": {"k": ["fine", "nul\u0000"]}}, "turns[0].metadata.k[1]"),
    ({"text": "ok", "metadata": {"nul\u0000key": 1}}, "turns[0].metadata"),
], ids=["text", "speaker", "metadata-value", "metadata-key"])
def test_nul_characters_are_400_naming_the_place(world, client_for, turn, where):
    body = {"session_key": "s", "turns": [turn]}
    err = _error(client_for(world["a"].key).post(WEAVE, body, format="json"), 400)
    assert err["message"].startswith(where + ":") and "NUL" in err["message"]
    assert _nodes(world) == 0


def test_unpaired_surrogate_escape_is_400(world, client_for):
    raw = '{"session_key": "s", "turns": [{"text": "half \\ud83d a pair"}]}'
    err = _error(_post_raw(client_for(world["a"].key), WEAVE, raw), 400)
    assert err["message"].startswith("turns[0].text:")
    # a whole pair is an ordinary character
    raw = '{"session_key": "s", "turns": [{"text": "a whole \\ud83d\\ude00 pair"}]}'
    assert _post_raw(client_for(world["a"].key), WEAVE, raw).status_code == 201


def test_nul_in_a_query_parameter_is_400(world, client_for):
    err = _error(client_for(world["a"].key).get("/api/v1/memories/nodes", {"session_key": "a\u0000b"}), 400)
    assert err["fields"] == {"session_key": ["NUL characters are not allowed."]}


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400", "9" * 5000])
def test_numbers_json_cannot_mean_are_400(world, client_for, number):
    raw = '{"query": "cat", "k": ' + number + "}"
    _error(_post_raw(client_for(world["a"].key), RESONATE, raw), 400)


@pytest.mark.parametrize(("path", "body", "field"), [
    (RESONATE, {"query": 12345}, "query"),
    (RESONATE, {"query": "cat", "k": "5"}, "k"),
    (RESONATE, {"query": "cat", "k": True}, "k"),
    (RESONATE, {"query": "cat", "reinforce": "yes"}, "reinforce"),
    (RESONATE, {"query": ["cat"]}, "query"),
    ("/api/v1/assets", {"kind": "skill", "title": "t", "summary": -4.1e301}, "summary"),
    ("/api/v1/assets", {"kind": "skill", "title": "t", "node_ids": ["1"]}, "node_ids"),
    ("/api/v1/assets", {"kind": "skill", "title": "t", "confidence": "0.5"}, "confidence"),
    ("/api/v1/context", {"query": "cat", "budget": {"max_recall_items": "3"}}, "budget"),
])
def test_wrong_json_types_are_field_errors(world, client_for, path, body, field):
    """DRF would coerce these ("5" -> 5, 5 -> "5", "yes" -> True); the schema promises JSON types."""
    err = _error(client_for(world["a"].key).post(path, body, format="json"), 400)
    assert field in err["fields"], err


def test_wrong_json_type_inside_a_list_names_the_item(world, client_for):
    body = {"session_key": "s", "turns": [{"text": "fine"}, {"text": 42}]}
    err = _error(client_for(world["a"].key).post(WEAVE, body, format="json"), 400)
    assert err["fields"]["turns"]["1"]["text"] == ["Expected a string."]
    assert _nodes(world) == 0


# --- SQL and LIKE metacharacters are data ----------------------------------------------------------

NASTY = ["100% sure", "a_c", "back\\slash", "O'Brien's", "x; DROP TABLE memory_node; --", "%", "_", "\\",
         "' OR '1'='1", "%' OR 1=1 --", "50%_off\\"]


def test_metacharacters_round_trip_verbatim(world, client_for):
    c = client_for(world["a"].key)
    r = c.post(WEAVE, {"session_key": "meta", "turns": [{"text": t, "speaker": t} for t in NASTY]},
               format="json")
    assert r.status_code == 201, r.content
    for node_id, text in zip(r.json()["node_ids"], NASTY, strict=True):
        node = c.get(f"/api/v1/memories/nodes/{node_id}").json()
        assert node["text"] == text and node["speaker"] == text


def test_session_key_filter_is_exact_not_a_pattern(world, client_for):
    c = client_for(world["a"].key)
    keys = ["a_c", "abc", "a%c", "a\\c", "a'c"]
    for key in keys:
        assert c.post(WEAVE, {"session_key": key, "turns": [{"text": f"turn of {key}"}]},
                      format="json").status_code == 201

    def listed(session_key: str) -> list[str]:
        r = c.get("/api/v1/memories/nodes", {"session_key": session_key})
        assert r.status_code == 200, r.content
        return [n["silks"]["temporal"]["session_key"] for n in r.json()["results"]]

    for key in keys:
        assert listed(key) == [key]
    for pattern in ["%", "a%", "_bc", "a_", "%c", "' OR '1'='1", "\\"]:
        assert listed(pattern) == [], pattern


def test_resonate_with_metacharacters(world, client_for):
    """Through the API (the engine) and through the Postgres fallback (``to_tsquery``) that serves
    cold or evicted orgs."""
    from memory.selectors import resonate_for
    from teams.auth import authenticate_key

    c = client_for(world["a"].key)
    texts = ["The discount is 50% off for staff.", "Zanzibar ferry leaves at noon.", "Quarterly report is late."]
    # A fixed day: a turn's date is indexed as words ("1 December 2026 …"), so on the 1st of a month
    # "' OR '1'='1" matched every turn written that day and the test failed by the calendar.
    ids = [c.post(WEAVE, {"session_key": f"m{i}", "turns": [{"text": t, "occurred_at": "2024-11-14T10:00:00Z"}]},
                  format="json").json()["node_ids"][0]
           for i, t in enumerate(texts)]
    actor = authenticate_key(world["a"].key)
    expected = {"%zanzibar%": [ids[1]], "zanzibar' --": [ids[1]], "50%_off\\": [ids[0]]}
    for query in NASTY + ["zanzibar' --", "%zanzibar%", "zanz_bar", "&|!:*()<->", "'", "\\"]:
        r = c.post(RESONATE, {"query": query, "k": 5, "reinforce": False}, format="json")
        assert r.status_code == 200, (query, r.content)
        body = r.json()
        assert body["served_by"] == "engine"
        lexical = [h["node_id"] for h in body["hits"] if h["explanation"]["channels"].get("lexical")]
        # only real words match; '%' and '_' are no wildcards and quotes or comments no syntax
        assert lexical == expected.get(query, []), (query, body["hits"])
        sql = resonate_for(actor=actor, query=query, k=5, force_sql=True)
        assert sql.served_by == "postgres"
        assert [h.node_id for h in sql.result.hits if h.explanation.channels.get("lexical")] == \
            expected.get(query, []), query


def test_audit_filters_are_exact(world, client_for):
    c = client_for(world["a"].owner)
    assert c.post("/api/v1/teams", {"name": "Metachar team"}, format="json").status_code == 201
    everything = c.get("/api/v1/audit").json()["results"]
    assert everything
    for value in ["%", "_", "user:%", "%team%", "' OR '1'='1", "\\"]:
        for param in ("actor", "action", "object_type", "object_id"):
            r = c.get("/api/v1/audit", {param: value})
            assert r.status_code == 200 and r.json()["results"] == [], (param, value)
    mine = c.get("/api/v1/audit", {"actor": "user:alpha-owner"}).json()["results"]
    assert mine and all(e["actor_label"] == "user:alpha-owner" for e in mine)


# --- huge and negative numbers ---------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "body", "field"), [
    ("post", RESONATE, {"query": "cat", "k": 101}, "k"),
    ("post", RESONATE, {"query": "cat", "k": 10**30}, "k"),
    ("post", RESONATE, {"query": "cat", "k": 0}, "k"),
    ("post", RESONATE, {"query": "cat", "k": -1}, "k"),
    ("post", RESONATE, {"query": "cat", "k": 2.5}, "k"),
    ("post", RESONATE, {"query": "cat", "k": "ten"}, "k"),
    ("post", RESONATE, {"query": "cat", "depth": -1}, "depth"),
    ("post", RESONATE, {"query": "cat", "depth": 99}, "depth"),
    ("post", "/api/v1/context", {"query": "cat", "k": 10**9}, "k"),
    ("post", "/api/v1/context", {"query": "cat", "k": -3}, "k"),
    ("post", "/api/v1/context", {"query": "cat", "budget": {"max_recall_items": -5}}, "budget"),
    ("post", "/api/v1/context", {"query": "cat", "budget": {"max_recall_chars": 0}}, "budget"),
    ("post", "/api/v1/context", {"query": "cat", "budget": {"max_recall_chars": "lots"}}, "budget"),
    ("post", "/api/v1/context", {"query": "cat", "budget": {"bogus": 1}}, "budget"),
    ("get", "/api/v1/context", {"query": "cat", "k": "-1"}, "k"),
    ("post", "/api/v1/assets", {"kind": "skill", "title": "t", "confidence": -0.5}, "confidence"),
    ("post", "/api/v1/assets", {"kind": "skill", "title": "t", "node_ids": [-1]}, "node_ids"),
    ("post", WEAVE, {"session_key": "s", "turns": [{"text": "x"}], "team_id": -4}, "team_id"),
    ("get", "/api/v1/memories/nodes", {"limit": "0"}, "limit"),
    ("get", "/api/v1/memories/nodes", {"limit": "-1"}, "limit"),
    ("get", "/api/v1/memories/nodes", {"limit": "501"}, "limit"),
    ("get", "/api/v1/memories/nodes", {"limit": "99999999999999999999999"}, "limit"),
    ("get", "/api/v1/memories/nodes", {"limit": "ten"}, "limit"),
    ("get", "/api/v1/memories/nodes", {"cursor": "garbage"}, "cursor"),
    ("get", "/api/v1/memories/nodes", {"cursor": base64.b64encode(b"p=abc").decode()}, "cursor"),
    ("get", "/api/v1/memories/nodes", {"cursor": base64.b64encode(b"p=" + b"9" * 30).decode()}, "cursor"),
    ("get", "/api/v1/memories/nodes", {"cursor": base64.b64encode(b"o=-1").decode()}, "cursor"),
    ("get", "/api/v1/memories/nodes", {"kind": "%"}, "kind"),
], ids=lambda v: v if isinstance(v, str) and not v.startswith("/") else None)
def test_out_of_range_numbers_are_field_errors(world, client_for, method, path, body, field):
    c = client_for(world["a"].key)
    r = c.post(path, body, format="json") if method == "post" else c.get(path, body)
    err = _error(r, 400)
    assert field in err["fields"], err
    assert _nodes(world) == 0


def test_cursors_we_issue_still_page(world, client_for):
    c = client_for(world["a"].key)
    c.post(WEAVE, {"session_key": "p", "turns": [{"text": f"turn {i}"} for i in range(5)]}, format="json")
    first = c.get("/api/v1/memories/nodes", {"limit": "2"}).json()
    assert len(first["results"]) == 2 and first["next"]
    second = c.get(first["next"]).json()
    assert len(second["results"]) == 2
    assert {n["id"] for n in first["results"]}.isdisjoint(n["id"] for n in second["results"])


def test_unknown_api_url_is_json_404(world, client_for):
    for url in ["/api/v1/nope", "/api/v1/teams/-1", "/api/v1/memories/nodes/abc"]:
        err = _error(client_for(world["a"].key).get(url), 404)
        assert err["code"] == "no_endpoint"


# --- import: a file is data, never a way to reach other columns or another org ---------------------


def _import(client, rows: list) -> object:
    header = {"type": "header", "format": "nylon-export", "version": 1, "org": "x"}
    lines = [json.dumps(header)] + [r if isinstance(r, str) else json.dumps(r) for r in rows]
    return client.post("/api/v1/import", {"jsonl": "\n".join(lines)}, format="json")


@pytest.fixture
def node_row(world, client_for) -> dict:
    """A node line as the export writes it (one turn of the org owner's)."""
    c = client_for(world["a"].owner)
    assert c.post(WEAVE, {"session_key": "exp", "turns": [{"text": "exported turn"}]}, format="json").status_code == 201
    lines = b"".join(c.get("/api/v1/export").streaming_content).decode().splitlines()
    row = next(json.loads(line) for line in lines if json.loads(line)["type"] == "node")
    return {**row, "text": "imported", "embedding": None}


def test_import_cannot_name_another_org_or_raw_columns(world, client_for, node_row):
    c = client_for(world["a"].owner)
    assert _import(c, [node_row]).status_code == 201  # the well-formed row imports
    before = Node.objects.count()
    for extra in ({"org_id": world["b"].org.id}, {"owner_user_id": world["b"].owner.id},
                  {"team_id": world["b"].team.id}, {"search": "x"}):
        err = _error(_import(c, [{**node_row, **extra}]), 400)
        assert "Unknown node columns" in err["fields"]["jsonl"][0], extra
    assert Node.objects.count() == before
    assert not Node.objects.filter(org=world["b"].org, text="imported").exists()


@pytest.mark.parametrize("bad", [
    "42", "[1, 2]", '"text"', "{not json",
    {"type": "edge", "kind": "next", "weight": "heavy"},
    {"seq": "first"}, {"kind": "x" * 500}, {"occurred_at": None}, {"occurred_at": "yesterday"},
    {"type": "wormhole"},
], ids=["int", "list", "string", "broken", "edge-weight", "node-seq", "node-kind", "null-time", "bad-time",
        "type"])
def test_malformed_import_lines_are_400_and_import_nothing(world, client_for, node_row, bad):
    c = client_for(world["a"].owner)
    before = Node.objects.count()
    line = bad if isinstance(bad, str) or "type" in bad else {**node_row, **bad}
    if isinstance(line, dict) and line.get("type") == "edge":
        line = {**line, "src": node_row["id"], "dst": node_row["id"]}
    err = _error(_import(c, [node_row, line]), 400)
    assert err["fields"]["jsonl"]
    assert Node.objects.count() == before  # one transaction: the good first row is rolled back too


# --- per-key rate limits (real uvicorn, NYLON_RATE_LIMIT=5/min) ------------------------------------


@pytest.fixture(scope="module")
def limited(django_db_setup, django_db_blocker):
    server = start_live_server(NYLON_RATE_LIMIT="5/min")
    yield server
    server.stop()


@pytest.mark.django_db(transaction=True)
def test_rate_limit_is_per_key_with_429_and_retry_after(limited, world):
    from teams import services

    _, second_key = services.api_key_create(actor=None, agent=world["a"].agent, name="second")

    def get(key: str) -> httpx.Response:
        return httpx.get(f"{limited.url}/api/v1/org", headers={"Authorization": f"Bearer {key}"}, timeout=30)

    assert [get(world["a"].key).status_code for _ in range(5)] == [200] * 5
    r = get(world["a"].key)
    err = _error(r, 429)
    assert err["code"] == "throttled"
    assert 1 <= int(r.headers["Retry-After"]) <= 60
    assert r.json()["request_id"] == r.headers["X-Request-Id"]
    # another key, even of the same agent, and another org's key have their own budgets
    assert get(second_key).status_code == 200
    assert get(world["b"].key).status_code == 200
    assert get(world["a"].key).status_code == 429


@pytest.mark.django_db(transaction=True)
def test_chunked_body_without_length_is_refused(limited, world):
    """A body sent chunked (no Content-Length) cannot slip past the size limit."""

    def chunks():
        for _ in range(3 * 1024):
            yield b"x" * 1024

    r = httpx.post(f"{limited.url}{RESONATE}", content=chunks(), timeout=60,
                   headers={"Authorization": f"Bearer {world['b'].key}", "Content-Type": "application/json"})
    assert 400 <= r.status_code < 500 and r.status_code != 429, r.text
    assert set(r.json()["error"]) == {"code", "message", "fields"}
