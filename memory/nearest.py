"""Nearest stored nodes to a vector, in SQL, for the write-side checks that need them (similar-edge
linking, conflict candidates, bridge de-duplication).

Each of these filters by org and owner, and an HNSW index scan answers such a query approximately
in two ways that matter here: the scan returns the nearest index tuples first and filters after,
so other tenants' vectors (and dead tuples) can crowd out the owner's (iterative scans, switched
on for every connection in ``nylon_project.embedded``, go on scanning until the LIMIT is met); and
an HNSW graph can leave an element unreachable from a query's neighbourhood, which no scan setting
fixes. So the answer is the union of an exact ranking of the owner's most recent ``RECENT_WINDOW``
matching rows (read through the ``(org, owner, -id)`` btree indexes) and the HNSW scan over all of
them: deterministic for recent memory, approximate only beyond it, and bounded in cost.

A check that looks past one owner (conflict candidates among the nodes other writers share with
the new node) has no btree index that keeps its exact window short: ``window_where`` then bounds
the exact part by the org's most recent rows (``reflection.conflicts._recent_floor``, read once per
check), so its cost does not grow with the org, and the HNSW scan covers the rest.
"""

from __future__ import annotations

from collections.abc import Iterable

RECENT_WINDOW = 2_000


def vector_literal(values: Iterable[float]) -> str:
    """A pgvector text literal (``'[0.1,…]'``, cast with ``%s::vector``) for a raw cursor: the
    connections do not all register pgvector's binary adapter. Seven decimals: below float32's
    resolution for unit vectors' components, so cosine ranks are those of the stored vectors."""
    return "[" + ",".join(f"{float(x):.7f}" for x in values) + "]"


def nearest_sql(*, where: str, query: str, limit: str, window_where: str = "TRUE") -> str:
    """A SELECT of ``(id, sim)`` for the ``limit`` rows of ``memory_node m`` satisfying ``where`` that
    are nearest to the vector expression ``query`` (cosine similarity, nearest first, ties by id).

    ``where``, ``query`` and ``limit`` are SQL fragments; each is used more than once, so pass their
    parameters by name (``%(org)s``), or make ``query`` a column of an outer query (LATERAL).
    ``window_where`` narrows only the exact window of recent rows, not the HNSW scan."""
    return f"""SELECT u.id, 1 - min(u.d) AS sim FROM (
            (SELECT r.id, r.embedding <=> {query} AS d FROM (
                SELECT m.id, m.embedding FROM memory_node m WHERE {where} AND {window_where}
                ORDER BY m.id DESC LIMIT {RECENT_WINDOW}) r
             ORDER BY 2 LIMIT {limit})
            UNION ALL
            (SELECT m.id, m.embedding <=> {query} AS d FROM memory_node m WHERE {where}
             ORDER BY m.embedding <=> {query} LIMIT {limit})
        ) u GROUP BY u.id ORDER BY min(u.d), u.id LIMIT {limit}"""


def nearest_and_named_sql(*, where: str, query: str, limit: str, terms: str, named_limit: str,
                          window_where: str = "TRUE") -> str:
    """``nearest_sql``'s rows and, beside them, the ``named_limit`` rows of the same exact window
    whose ``search`` tsvector matches the ``websearch_to_tsquery('english', terms)`` (e.g. the new
    node's entities, ``'"D5" or "Bank of America"'``), ranked by ``ts_rank`` (more of the terms
    first), then by cosine, then by id: a SELECT of ``(named, id, sim, ord)``, ``named`` false with
    ``ord`` 0 for the nearest rows, true with the rank's position (1, 2, …) for the named ones.

    Many statements that embed alike ("The retention period for dataset D<i> is 30 days.", twelve
    of them) leave the one about the same thing outside any ``limit`` nearest; its name finds it.
    The window is read once (a materialised CTE of ids, distances and tsvectors, not vectors) for
    both rankings, so the named part costs the match of the window's tsvectors, not another read.
    It looks no further than that window: the GIN index on ``search`` needs a bitmap scan, which a
    conflict probe's plan may not use (``reflection.conflicts._index_scans_only``), and its cost
    would grow with the rows of every tenant naming the term."""
    # the distance outside the LIMIT: inside, a plan that sorts the owner's rows by id (read
    # through the owner's foreign-key index) computed it for every one of them, not for 2,000
    window = f"""SELECT w.id, w.embedding <=> {query} AS d, w.search FROM (
                SELECT m.id, m.embedding, m.search FROM memory_node m WHERE {where} AND {window_where}
                ORDER BY m.id DESC LIMIT {RECENT_WINDOW}) w"""
    return f"""WITH r AS MATERIALIZED ({window})
        (SELECT false AS named, n.id, n.sim, 0 AS ord FROM (SELECT u.id, 1 - min(u.d) AS sim FROM (
            (SELECT r.id, r.d FROM r ORDER BY 2 LIMIT {limit})
            UNION ALL
            (SELECT m.id, m.embedding <=> {query} AS d FROM memory_node m WHERE {where}
             ORDER BY m.embedding <=> {query} LIMIT {limit})
        ) u GROUP BY u.id ORDER BY min(u.d), u.id LIMIT {limit}) n)
        UNION ALL
        (SELECT true, x.id, 1 - x.d, row_number() OVER (ORDER BY x.rank DESC, x.d, x.id) FROM (
            SELECT r.id, r.d, ts_rank(r.search, t.q) AS rank
            FROM r, websearch_to_tsquery('english', {terms}) t(q) WHERE r.search @@ t.q
            ORDER BY 3 DESC, 2, 1 LIMIT {named_limit}) x)"""
