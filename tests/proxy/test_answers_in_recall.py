"""The model's answers the proxy writes back are derived: recalled beside the statements they
restate, they must not outrank them, and two identical ones are one line. An audit asked "When is
the Postgres upgrade?" twice through the proxy: the context listed the two identical answers first,
then the people's statements they were made from, and an unrelated earlier answer as well."""

from __future__ import annotations

import pytest

from assets.context import MODEL_ANSWER
from memory.models import Node
from proxy import writeback
from tests.assets.helpers import weave

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]

QUESTION = "When is the Postgres upgrade?"
ANSWER = ("The Postgres upgrade is scheduled for Saturday 14 December at 02:00 UTC; Ben runs the Postgres 16 "
          "upgrade and expects about twenty minutes of downtime for the Postgres cluster.")
STATEMENTS = [("ana", "The Postgres upgrade is scheduled for Saturday 14 December at 02:00 UTC."),
              ("ben", "I will run the Postgres 16 upgrade; expect about twenty minutes of downtime.")]
CHATTER = ["The CI pipeline takes twelve minutes on main.", "Run the linter before every commit.",
           "Deploys go out on Tuesdays at 14:00 UTC.", "The staging cluster has three nodes.",
           "Feature flags live in the config service.", "The retro stays on Fridays at 16:00.",
           "Grafana dashboards are linked from the runbook.", "The invoice export ships next sprint."]


def _exchange(world, *, session: str, user: str, answer: str) -> list[int]:
    """What the proxy's after-answer step does for one answered request (proxy.writeback), run here."""
    from teams.models import ApiKey

    turns = writeback.turns_for(session_key=session, position=1, user_text=user, answer=answer, model="gpt-test")
    key_id = ApiKey.objects.get(agent=world["a"].agent).pk
    return writeback.write_back(key_id=key_id, session_key=session, turns=turns)


def test_model_answers_rank_below_the_statements_and_identical_ones_are_one_line(world, client_for):
    a = world["a"]
    people = client_for(a.member)
    statements = [weave(people, text, visibility="org", session="ops", speaker=who) for who, text in STATEMENTS]
    for i, text in enumerate(CHATTER):
        weave(people, text, visibility="org", session=f"c{i}")
    # an earlier, unrelated question answered through the proxy, then the same question asked twice
    _exchange(world, session="chat-0", user="Summarise the retro notes please.",
              answer="From the retro: the standups get shorter and the retro stays on Fridays.")
    first = _exchange(world, session="chat-1", user=QUESTION, answer=ANSWER)
    second = _exchange(world, session="chat-2", user=QUESTION, answer=ANSWER)
    answers = {first[1], second[1]}
    assert len(answers) == 2  # the premise: two stored answers of the same text
    assert all(n.metadata.get("derived") == MODEL_ANSWER for n in Node.objects.filter(id__in=answers))

    agent = client_for(a.key)
    r = agent.post("/api/v1/context", {"query": QUESTION, "k": 8, "reinforce": False}, format="json")
    assert r.status_code == 200, r.content
    recall = r.json()["recall"]
    ids = [x["node_id"] for x in recall]
    assert set(statements) <= set(ids), recall
    # the answer once, the other folded into it
    shown = [x for x in recall if x["node_id"] in answers]
    assert len(shown) == 1, recall
    assert shown[0]["folded"] == sorted(answers - {shown[0]["node_id"]})
    # the question asked twice is one line too
    assert sum(x["text"] == QUESTION for x in recall) <= 1
    # every model answer below every matched statement of a person
    last_matched = max(i for i, x in enumerate(recall) if x["matched"] and x["derived"] != MODEL_ANSWER)
    first_answer = min(i for i, x in enumerate(recall) if x["derived"] == MODEL_ANSWER)
    assert first_answer > last_matched, [(x["node_id"], x["derived"], x["matched"], x["text"][:40]) for x in recall]
    assert ids.index(shown[0]["node_id"]) > max(ids.index(s) for s in statements)
    # and the scores say the same order: a client sorting by score keeps it (the answer's own score
    # was above the statements')
    scores = [x["score"] for x in recall]
    assert scores == sorted(scores, reverse=True), scores
    # the unrelated answer, if recalled at all, is below everything else
    retro = [i for i, x in enumerate(recall) if x["derived"] == MODEL_ANSWER and "retro" in x["text"]]
    assert not retro or retro == [len(recall) - 1]
    # the line says how many it stands for
    line = next(ln for ln in r.json()["dynamic"].split("\n") if f"[memory {shown[0]['node_id']}]" in ln)
    assert "model answer" in line and "+1 similar" in line


def test_mcp_resonate_folds_and_demotes_the_same_way(world, client_for):
    from assets.mcp import tool_resonate
    from teams.auth import actor_for_agent

    a = world["a"]
    people = client_for(a.member)
    statements = [weave(people, text, visibility="org", session="ops", speaker=who) for who, text in STATEMENTS]
    first = _exchange(world, session="chat-1", user=QUESTION, answer=ANSWER)
    second = _exchange(world, session="chat-2", user=QUESTION, answer=ANSWER)
    answers = {first[1], second[1]}
    out = tool_resonate(actor_for_agent(a.agent, scopes=frozenset({"read"})), query=QUESTION, k=6)
    hits = out["hits"]
    ids = [h["node_id"] for h in hits]
    assert len([i for i in ids if i in answers]) == 1, hits
    answer_at = next(i for i, h in enumerate(hits) if h["node_id"] in answers)
    assert answer_at > max(ids.index(s) for s in statements)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert out["no_match"] is False and all("matched" in h for h in hits)


def test_what_counts_as_the_same_statement():
    from assets.context import _same_text_key as key

    assert key("The upgrade is on Saturday.") == key("the upgrade is on  Saturday!")
    assert key(QUESTION) == key("when is the Postgres upgrade ?")
    assert key("v2.4 is deployed") != key("v2.5 is deployed")
    assert key("The deploy is frozen.") != key("The deploy is not frozen.")
    assert key("Is the deploy frozen?") != key("The deploy is frozen.")
    assert key("We shipped it.") != key("We ship it.")
    # texts with no word are the same only when they are the same text
    assert key("👍") != key("...") and key("👍") == key(" 👍 ")
