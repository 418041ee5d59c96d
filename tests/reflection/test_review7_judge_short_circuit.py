"""A conflict check stops calling the judge after the endpoint itself failed (timeout, 5xx after
retries, 401/402): a hung LLM costs the task one call's retries, not every pair's, and the rule
verdicts stand. A bad answer to one prompt does not stop the others."""

from __future__ import annotations

import pytest

from reflection import conflicts
from reflection.models import Conflict

from .helpers import weave

pytestmark = pytest.mark.django_db

TEXTS = ["I eat spicy food.", "I don't eat spicy food.", "I eat spicy food every day.",
         "I don't eat spicy food anymore."]


def statements(world, client_for) -> list[int]:
    c = client_for(world["a"].key)
    return [weave(c, f"s{i}", end=False, turns=[{"speaker": "Ana", "text": t,
                                                 "occurred_at": f"2023-05-0{i + 1}T10:00:00Z"}])["node_ids"][0]
            for i, t in enumerate(TEXTS)]


def judge_requests(server) -> int:
    return sum(1 for r in server.requests if r["task"] == "conflict")


@pytest.mark.parametrize("outage,calls", [(503, 3), (402, 1), (("slow", 1.5), 3)])
def test_an_endpoint_failure_stops_the_judge_for_the_rest_of_the_task(world, client_for, llm, outage, calls):
    server = llm.need_script()
    ids = statements(world, client_for)
    server.default = outage
    created = conflicts.detect(org_id=world["a"].org.id, node_ids=ids)
    assert judge_requests(server) == calls  # one call and its retries (max_retries 2), then none
    assert created >= 2 and set(Conflict.objects.values_list("detector", flat=True)) == {"rule"}


def test_a_bad_answer_to_one_pair_does_not_stop_the_others(world, client_for, llm):
    server = llm.need_script()
    ids = statements(world, client_for)
    server.push("garbage", "garbage")  # the first pair: malformed twice (retried once), rule verdict
    conflicts.detect(org_id=world["a"].org.id, node_ids=ids)
    assert judge_requests(server) > 2
    assert Conflict.objects.filter(detector="llm").exists()
