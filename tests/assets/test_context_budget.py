"""Recall under a character budget: the best hit that does not fit is cut to fit (its marker counted),
not skipped for a lower-ranked one that happens to be short; max_chars_per_memory bounds the text
marker included; dropped.recall counts what the budget left out, not the engine's over-fetch."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from assets import context
from assets.context import Budget, _cut, build_context
from memory.cache import get_cache
from memory.engine.types import Explanation, Hit
from teams.auth import authenticate_key

from .helpers import weave

pytestmark = pytest.mark.django_db

QUERY = "Who owns the billing migration?"
BEST = ("Priya owns the billing migration now: she took it over from Sam on Monday and runs the "
        "invoice cut-over plan.")
STALE = "Sam led the billing work in 2024."
FILLER = ["The billing dashboard loads in two seconds.", "Migration scripts live in the ops repo.",
          "Sam prefers the aisle seat.", "Invoices are sent on the first of the month.",
          "The payment provider is Adyen.", "The ops repo has a billing folder.",
          "Priya reviews the migration scripts.", "Sam runs the data migration dry run on Fridays.",
          "The billing team meets on Tuesdays.", "The migration checklist has twelve steps."]


@pytest.fixture(autouse=True)
def fresh_cache():
    get_cache().drop()
    yield
    get_cache().drop()


def _ctx(client, **budget) -> dict:
    body = {"query": QUERY, "reinforce": False}
    if budget:
        body["budget"] = budget
    r = client.post("/api/v1/context", body, format="json")
    assert r.status_code == 200, r.content
    return r.json()


def test_a_tight_budget_cuts_the_best_hit_instead_of_skipping_it(world, client_for):
    c = client_for(world["a"].key)
    best = weave(c, BEST, session="s1")
    weave(c, STALE, session="s2")
    for i, text in enumerate(FILLER):
        weave(c, text, session=f"f{i}")
    assert len(BEST) > 100
    free = _ctx(c)
    assert free["recall"][0]["node_id"] == best and free["recall"][0]["text"] == BEST  # the premise
    # Many more hits exist than the 5 asked for, and none was left out by the budget.
    assert len(free["recall"]) == 5 and free["dropped"]["recall"] == 0

    tight = _ctx(c, max_recall_chars=100)
    first = tight["recall"][0]
    assert first["node_id"] == best and first["truncated"] is True and len(first["text"]) <= 100
    assert first["text"].startswith(BEST[:60]) and re.search(r"… \[truncated \d+ chars\]$", first["text"])
    removed = int(re.search(r"truncated (\d+) chars", first["text"]).group(1))
    assert len(first["text"]) - len(f"… [truncated {removed} chars]") == len(BEST) - removed
    assert sum(len(r["text"]) for r in tight["recall"]) <= 100
    assert f"[memory {best}] {first['text']}" in tight["dynamic"]
    assert tight["dropped"]["recall"] == 5 - len(tight["recall"]) and tight["truncated"]["recall"] == 1

    both = _ctx(c, max_recall_chars=100, max_chars_per_memory=100)
    assert both["recall"][0]["node_id"] == best and len(both["recall"][0]["text"]) <= 100
    assert all(len(r["text"]) <= 100 for r in both["recall"])


@pytest.mark.parametrize("length", [5, 50, 99, 100, 101, 116, 1000, 12345])
@pytest.mark.parametrize("limit", [1, 5, 22, 23, 40, 100, 4000])
def test_a_cut_fits_its_limit_marker_included(length, limit):
    text = "abcdefghij" * (length // 10) + "x" * (length % 10)
    out, cut = _cut(text, limit)
    assert len(out) <= limit and cut == (length > limit)
    if not cut:
        assert out == text
    elif m := re.search(r"… \[truncated (\d+) chars\]$", out):
        kept = out[:m.start()]
        assert text.startswith(kept) and len(kept) + int(m.group(1)) == length and kept
        assert len(out) >= limit - 1  # no room wasted but a digit the marker may lose
    else:
        assert out == text[:limit - 1] + "…"  # no room for the marker: a bare ellipsis


def _fake_hits(monkeypatch, texts: list[str]) -> None:
    ex = Explanation(channels={"lexical": 1, "vector": 1}, seed=True, path=(), hops=0,
                     parts={"cosine": 0.9})
    hits = tuple(Hit(node_id=10_000 + i, local=i, score=1.0 - i / 100, text=t, kind=0, explanation=ex)
                 for i, t in enumerate(texts))
    out = SimpleNamespace(result=SimpleNamespace(hits=hits), vector_used=True, index=None, allowed=None)
    monkeypatch.setattr("memory.selectors.resonate_for", lambda **kw: out)


def test_too_little_room_for_a_useful_cut_lets_a_short_lower_hit_fit(world, monkeypatch):
    actor = authenticate_key(world["a"].key)
    _fake_hits(monkeypatch, ["a" * 80, "b" * 200, "c" * 15, "d" * 500])
    # 90 chars: the first fits whole; 10 left is no useful part of the second, the third fits whole
    res = build_context(actor=actor, query="q", budget=Budget.with_overrides({"max_recall_chars": 95}),
                        reinforce=False)
    assert [r["text"][0] for r in res.recall] == ["a", "c"] and res.dropped["recall"] == 2
    # with room for a useful part the second is cut to it, and nothing lower is taken in its place
    res = build_context(actor=actor, query="q", budget=Budget.with_overrides({"max_recall_chars": 150}),
                        reinforce=False)
    assert [r["text"][0] for r in res.recall] == ["a", "b"] and len(res.recall[1]["text"]) == 70
    assert res.recall[1]["truncated"] and res.dropped["recall"] == 2 and res.truncated["recall"] == 1
    # over-fetched hits beyond max_recall_items are never counted as dropped
    res = build_context(actor=actor, query="q", budget=Budget.with_overrides({"max_recall_items": 2}),
                        reinforce=False)
    assert len(res.recall) == 2 and res.dropped["recall"] == 0
    assert context.MIN_USEFUL_RECALL_CHARS == 40
