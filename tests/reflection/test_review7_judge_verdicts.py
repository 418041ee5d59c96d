"""Each pair is judged once: within a check (node X finds Y and Y finds X) and across checks (a
re-sent follow-up, a redelivery) the judge's "no" is remembered instead of paid for again."""

from __future__ import annotations

import pytest

from reflection import conflicts
from reflection.models import Conflict

from .helpers import weave

pytestmark = pytest.mark.django_db

NO = ("json", {"contradicts": False, "reason": "different variants can both be liked"})


def statements(world, client_for) -> list[int]:
    c = client_for(world["a"].key)
    turns = [{"speaker": "Dee", "text": f"I like the dashboard colour scheme in variant {v}.",
              "occurred_at": "2023-05-08T10:00:00Z"} for v in ("blue", "green", "teal")]
    return weave(c, "s1", end=False, turns=turns)["node_ids"]


def judged(server) -> list[str]:
    return [r["body"]["messages"][-1]["content"] for r in server.requests if r["task"] == "conflict"]


def test_a_no_verdict_is_not_asked_again(world, client_for, llm, settings):
    server = llm.need_script()
    ids = statements(world, client_for)
    server.default = NO
    assert conflicts.detect(org_id=world["a"].org.id, node_ids=ids) == 0
    asked = judged(server)
    assert len(asked) == 3 and len(set(asked)) == 3  # three pairs, each once (before: each twice)
    assert conflicts.detect(org_id=world["a"].org.id, node_ids=ids) == 0  # a re-sent check
    assert len(judged(server)) == 3
    settings.NYLON_LLM_MODEL = "scripted-2"  # another judge decides afresh
    server.default = "json"  # which finds contradictions
    assert conflicts.detect(org_id=world["a"].org.id, node_ids=ids) == 3
    assert len(judged(server)) == 6 and Conflict.objects.filter(detector="llm").count() == 3
