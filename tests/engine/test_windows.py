from __future__ import annotations

import numpy as np

from memory.engine import NodeRecord, ResonateParams, Scope, TenantIndex, resonate
from memory.engine.windows import ContextWindows, window_cosine


def _docs(cw: ContextWindows, locs) -> list[set[int]]:
    return [set(m) for m in cw.neighbours(np.asarray(locs))]


def test_windows_follow_session_order_and_deletes() -> None:
    cw = ContextWindows(radius=1)
    cw.update(0, 5, 0, ["a"])
    cw.update(1, 5, 2, ["c"])  # seq 1 arrives later
    cw.update(2, 9, 1, ["x"])  # other session
    cw.update(3, 0, 0, ["solo"])  # no session: a window of one
    assert _docs(cw, [0, 1, 2, 3]) == [{0}, {1}, {2}, {3}]
    cw.update(4, 5, 1, ["b"])
    assert _docs(cw, [0, 1, 4]) == [{0, 4}, {1, 4}, {0, 1, 4}]
    vis = np.ones(5, bool)
    q = cw.query(["c"], vis)
    assert set(q.locals.tolist()) == {1, 4}  # the neighbour's window holds "c" too
    cw.remove(1)
    assert set(cw.query(["c"], vis).locals.tolist()) == set()
    assert _docs(cw, [4]) == [{0, 4}]


def test_window_channel_finds_turn_through_its_neighbour() -> None:
    idx = TenantIndex(2)
    recs = [
        NodeRecord(
            1, "where did you go camping last week", session_key=3, seq=0, vector=np.array([1.0, 0.0])
        ),
        NodeRecord(2, "the lake, it was lovely", session_key=3, seq=1, vector=np.array([0.0, 1.0])),
        NodeRecord(3, "unrelated chatter", session_key=4, seq=0, vector=np.array([0.0, 1.0])),
    ]
    for r in recs:
        r.scope = Scope.ORG
    idx.upsert_nodes(recs)
    vis = idx.visibility_mask()
    p = ResonateParams(depth=0, n_lex=0, n_vec=0, n_win=5, final="rank", w_rank_act=0, w_rank_cos=0)
    res = resonate(idx, query_text="camping", allowed=vis, params=p, now_days=0.0)
    assert set(res.node_ids) == {1, 2}
    hidden = vis.copy()
    hidden[idx.local_of(1)] = False
    wc = window_cosine(idx.windows, idx.vectors, np.array([idx.local_of(2)]), np.array([1.0, 0.0]), hidden)
    assert wc[0] == 0.0  # a hidden neighbour does not lend its vector


def test_member_matrix_follows_the_windows_through_moves_duplicates_and_removals() -> None:
    rng = np.random.default_rng(5)
    for radius in (1, 2):
        win = ContextWindows(radius=radius)
        live: set[int] = set()
        for step in range(600):
            local = int(rng.integers(0, 60))
            if local in live and rng.random() < 0.2:
                win.remove(local)
                live.discard(local)
            else:  # place or move; a few sessions and a narrow seq range make shared slots common
                win.update(local, int(rng.integers(0, 4)), int(rng.integers(0, 12)), [f"t{local}"])
                live.add(local)
            ids = np.arange(70)
            m = win.member_matrix(ids)
            for i in ids.tolist():
                assert [x for x in m[i].tolist() if x >= 0] == win.neighbours(np.array([i]))[0], (step, i)
