"""A model's replies written back by the proxy are not checked for conflicts: two replies of a fake
upstream ("… system prompt length=0" / "… length=966") were queued as a conflict for people to
resolve. Statements of people and agents still are."""

from __future__ import annotations

import pytest

from reflection import conflicts
from reflection.models import Conflict
from tests.assets.helpers import weave

from .test_answers_in_recall import _exchange

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]


def test_model_replies_make_no_conflict_and_statements_still_do(world, client_for, settings):
    settings.NYLON_LLM_URL = ""
    a = world["a"]
    first = _exchange(world, session="chat-1", user="What is the status?",
                      answer="FAKE ANSWER. system prompt length=0")
    second = _exchange(world, session="chat-2", user="What is the status now?",
                       answer="FAKE ANSWER. system prompt length=966")
    assert conflicts.detect(org_id=a.org.id, node_ids=[first[1], second[1]]) == 0
    assert not Conflict.objects.exists()

    people = client_for(a.member)
    old = weave(people, "The customer portal is hosted in Frankfurt.", visibility="org", session="p1")
    new = weave(people, "The customer portal is hosted in Dublin.", visibility="org", session="p2")
    assert conflicts.detect(org_id=a.org.id, node_ids=[new]) == 1
    assert Conflict.objects.filter(node_a_id=old, node_b_id=new).exists()
