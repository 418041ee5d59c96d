"""The memory browser at 100k nodes: keyset pages are one bounded query each, never a full load."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

N = 100_000


def _bulk_nodes(org_id: int, user_id: int, n: int) -> None:
    with connection.cursor() as cur:
        cur.execute(
            """INSERT INTO memory_node (org_id, owner_user_id, visibility, kind, text, speaker, fact, entities, tags,
                   occurred_at, session_key, seq, time_refs, valence, intensity, mentions, source_kind, event_id,
                   source_node_ids, metadata, confidence, t0, lam, tension_updated_at, embedded, created_at,
                   updated_at)
               SELECT %s, %s, 'org', 'leaf',
                      'Bulk note ' || g || CASE WHEN g %% 1000 = 0 THEN ' mentions zanzibar' ELSE '' END,
                      '', '', '{}', '{}', now() - (g || ' minutes')::interval, '', 0, '[]', 0, 0, 0, 'import', '',
                      '{}', '{}', 1, 1, 0.01, now(), false, now(), now()
               FROM generate_series(1, %s) AS g""",
            [org_id, user_id, n],
        )
        cur.execute("ANALYZE memory_node")


def _ids(html: str) -> list[int]:
    return [int(x) for x in re.findall(r'data-node-id="(\d+)"', html)]


def test_browser_pages_through_100k_nodes_with_bounded_queries(world, login):
    a = world["a"]
    _bulk_nodes(a.org.id, a.owner.id, N)
    c = login(a.member)
    with CaptureQueriesContext(connection) as q:
        html = c.get("/console/memories/").content.decode()
    first = _ids(html)
    # newest first by occurrence: note g happened g minutes ago, so the lowest ids lead
    assert len(first) == 50 and first == sorted(first)
    node_sql = [x["sql"] for x in q.captured_queries if 'FROM "memory_node"' in x["sql"]]
    assert node_sql and all("LIMIT" in s for s in node_sql), node_sql
    assert not any('"embedding"' in s for s in node_sql)  # listing never loads vectors
    # deep in the keyset: still one bounded page (speed is measured by benchmarks, not asserted here)
    after = first[-1] + N * 9 // 10
    deep = _ids(c.get(f"/console/memories/?after={after}").content.decode())
    assert deep == list(range(after + 1, after + 51))
    # full-text over the generated tsvector column
    hits = _ids(c.get("/console/memories/?q=zanzibar&limit=200").content.decode())
    assert len(hits) == N // 1000
    # the dashboard aggregates in SQL
    dash = c.get("/console/").content.decode()
    assert re.search(rf'id="node-total">{N}<', dash)
