"""Chinese, Japanese and Korean memories are found by words, not only by meaning: the lexical
channel (engine BM25 and the Postgres fallback) matches a paraphrase through shared character
bigrams, where a clause without spaces used to be one token."""

from __future__ import annotations

import pytest
from django.utils import timezone

from memory import nearest
from memory.cache import get_cache
from memory.models import Node
from memory.selectors import resonate_for
from teams.auth import actor_for_agent

pytestmark = pytest.mark.django_db

# Speakers in pinyin: the 'english' tsvector keeps a speaker's name as a lexeme of its own, and a
# Chinese one would match a query bigram whole, hiding whether the text itself is matched.
ZH_TURNS = [
    ("Li Lei", "我昨天在北京见了韩梅梅，我们一起吃了烤鸭。"),
    ("Han Meimei", "下个月我要去上海出差，住在外滩附近。"),
    ("Li Lei", "我的猫把咖啡打翻在键盘上了。"),
    ("Han Meimei", "季度预算评审改到星期五了。"),
]
# Asks about turn 0 in other words: no run of the query is a run of the turn.
ZH_QUERY = "谁和韩梅梅一起吃烤鸭？"


@pytest.fixture(autouse=True)
def fresh_cache():
    get_cache().drop()
    yield
    get_cache().drop()


def _weave_zh(client) -> list[int]:
    ids = []
    for speaker, text in ZH_TURNS:
        r = client.post("/api/v1/memories/weave", {"text": text, "speaker": speaker, "session_key": "zh",
                                                    "visibility": "org"}, format="json")
        assert r.status_code == 201, r.content
        ids += r.json()["node_ids"]
    return ids


def _resonate(client, query: str, **headers) -> dict:
    r = client.post("/api/v1/memories/resonate", {"query": query}, format="json", **headers)
    assert r.status_code == 200, r.content
    return r.json()


def test_chinese_paraphrase_resonates_to_the_turn_through_the_lexical_channel(world, client_for):
    a, b = world["a"], world["b"]
    ids = _weave_zh(client_for(a.key))
    for who in (a.key, a.member):  # the writer, and a member of the org the turns are visible to
        body = _resonate(client_for(who), ZH_QUERY)
        top = body["hits"][0]
        assert top["node_id"] == ids[0], body["hits"]
        assert top["explanation"]["channels"]["lexical"] == 1
    other = _resonate(client_for(b.key), ZH_QUERY)
    assert not {h["node_id"] for h in other["hits"]} & set(ids)


def test_postgres_fallback_finds_the_chinese_paraphrase_by_words(world, client_for):
    a = world["a"]
    ids = _weave_zh(client_for(a.key))
    agent = actor_for_agent(a.agent, scopes=frozenset({"read", "write"}))
    sql = resonate_for(actor=agent, query=ZH_QUERY, force_sql=True)
    assert sql.served_by == "postgres"
    assert sql.result.hits[0].node_id == ids[0]
    assert sql.result.hits[0].explanation.channels["lexical"] == 1
    other = resonate_for(actor=actor_for_agent(world["b"].agent, scopes=frozenset({"read"})), query=ZH_QUERY,
                         force_sql=True)
    assert not {h.node_id for h in other.result.hits} & set(ids)


def test_postgres_fallback_reaches_korean_words_past_the_recent_window(world, client_for):
    """Beyond the substring scan's recent window, a query bigram still matches a stored word that
    starts with it (the 'english' tsvector keeps "서울에서" whole; the query asks for 서울:*)."""
    a = world["a"]
    r = client_for(a.key).post("/api/v1/memories/weave", {"text": "나는 어제 서울에서 친구를 만났다"}, format="json")
    assert r.status_code == 201, r.content
    kid = r.json()["node_ids"][0]
    now = timezone.now()
    Node.objects.bulk_create([Node(org=a.org, owner_agent=a.agent, text=f"filler note {i}", occurred_at=now,
                                   tension_updated_at=now) for i in range(nearest.RECENT_WINDOW + 10)])
    agent = actor_for_agent(a.agent, scopes=frozenset({"read", "write"}))
    sql = resonate_for(actor=agent, query="서울 친구", force_sql=True)
    lexical = {s.node_id: s.lexical_rank for s in sql.result.seeds if s.lexical_rank is not None}
    assert lexical == {kid: 1}
