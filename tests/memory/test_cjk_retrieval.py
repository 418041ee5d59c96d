"""Chinese, Japanese and Korean memories are found by words, not only by meaning: the lexical
channel (engine BM25 and the Postgres fallback) matches a paraphrase through shared character
bigrams, where a clause without spaces used to be one token."""

from __future__ import annotations

import json
import re
from contextlib import contextmanager

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import memory.cache as cache_mod
from memory import fallback, nearest
from memory.cache import EngineCache, get_cache
from memory.engine.tokenize import tokenize
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


# --- the fallback's cost bounds and its hostile input, through the API -----------------------------

@contextmanager
def _postgres_only():
    """Resonate answered by the SQL fallback, as for an org over the cache's byte cap."""
    old, cache_mod._cache = cache_mod._cache, EngineCache(max_bytes=1)
    try:
        yield
    finally:
        cache_mod._cache = old


def _resonate_sql(client, query: str) -> tuple[dict, list[str]]:
    """POST /resonate served from Postgres (raw JSON, so any string reaches the view) and the SQL it ran."""
    with _postgres_only(), CaptureQueriesContext(connection) as ctx:
        r = client.post("/api/v1/memories/resonate", json.dumps({"query": query}), content_type="application/json")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["served_by"] == "postgres"
    return body, [q["sql"] for q in ctx.captured_queries]


def _prefix_terms(sqls: list[str]) -> int:
    """The number of CJK prefix terms in the fallback's to_tsquery."""
    (sql,) = [s for s in sqls if "to_tsquery('english'" in s]
    words = re.search(r"to_tsquery\('english', '((?:[^']|'')*)'\)", sql).group(1)
    return sum(1 for t in words.split(" | ") if t.endswith(":*"))


def test_a_long_chinese_query_sends_the_fallback_a_bounded_tsquery(world, client_for):
    """A 4,000-character query (the API's limit) holds ~4,000 distinct bigrams; as prefix terms in one
    to_tsquery they cost Postgres rows x terms (40 s over 5,000 rows). Its first bigrams go, as to the
    substring scan, and they still find the turn the query starts with."""
    a = world["a"]
    ids = _weave_zh(client_for(a.key))
    rest = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(4000 - len(ZH_QUERY)))
    body, sqls = _resonate_sql(client_for(a.key), ZH_QUERY + rest)
    assert len(set(tokenize(ZH_QUERY + rest))) > 3000
    assert 0 < _prefix_terms(sqls) <= fallback._MAX_CJK_TERMS
    assert body["hits"][0]["node_id"] == ids[0]


def test_the_substring_scan_reads_the_head_of_each_recent_row(world, client_for):
    """The scan's cost is rows x terms x characters: it reads the first _SCAN_CHARS of each recent
    row (a chat turn whole), so 2,000 documents of 20,000 characters do not cost seconds a query.
    A match deeper inside one clause is left to the vector channel."""
    a = world["a"]
    c = client_for(a.key)
    pad = "甲乙丙丁" * (fallback._SCAN_CHARS // 4)  # one clause: its lexeme starts with 甲乙
    rows = {}
    for name, text in [("head", "我们一起吃了烤鸭" + pad), ("deep", pad + "我们一起吃了烤鸭")]:
        r = c.post("/api/v1/memories/weave", {"text": text, "visibility": "org"}, format="json")
        assert r.status_code == 201, r.content
        rows[name] = r.json()["node_ids"][0]
    body, _ = _resonate_sql(c, "一起吃烤鸭")
    lexical = {h["node_id"] for h in body["hits"] if h["explanation"]["channels"]["lexical"] is not None}
    assert rows["head"] in lexical and rows["deep"] not in lexical


# Every tsquery operator and quote, raw and full-width (folded to ASCII before splitting), next to
# CJK, Latin and digits; a 500 here is a to_tsquery syntax error.
HOSTILE = ["北京:*上海", "北京 & 上海 | !广州", "(北京) <-> 上海", "北京'上海\\", "ｆｏｏ＆ｂａｒ：＊",
           "北京：上海＆（）！＜－＞＊＼＇", "a:b & c | !(d) <2> e* f\\ 'g'", "'", "\\", ":*", "ー:*", "｜｜",
           "北\u3099京", "か\u3099き\u3099", "\u0301\u0301", "①②³½ﬁ", "한국어:*", "\U00020000\U00020001:*"]


def test_hostile_queries_never_break_the_fallback_tsquery(world, client_for):
    a = world["a"]
    ids = _weave_zh(client_for(a.key))
    for q in HOSTILE:
        _resonate_sql(client_for(a.key), q)
    body, _ = _resonate_sql(client_for(a.key), "韩梅梅:* & 烤鸭 | !(北京)")
    assert body["hits"][0]["node_id"] == ids[0]


def test_the_substring_scan_sees_only_what_the_actor_may_read(world, client_for):
    """The scan runs over the actor's visible rows: a private turn of the agent is not matched for
    a member of its org (nor for the other org), the agent itself finds it."""
    a, b = world["a"], world["b"]
    r = client_for(a.key).post("/api/v1/memories/weave", {"text": "我的银行卡密码写在抽屉里的本子上。",
                                                          "visibility": "private"}, format="json")
    assert r.status_code == 201, r.content
    secret = r.json()["node_ids"][0]
    query = "银行卡密码在哪"
    assert _resonate_sql(client_for(a.key), query)[0]["hits"][0]["node_id"] == secret
    for who in (a.member, a.owner, b.key):
        assert secret not in {h["node_id"] for h in _resonate_sql(client_for(who), query)[0]["hits"]}
