"""Session keys reach the engine as integers that must not merge two sessions of one org."""

from __future__ import annotations

import zlib

import numpy as np

from memory.cache import _record, _session_int
from memory.engine import TenantIndex

# A classic crc32 collision: the old 32-bit session hash mapped both keys to one session.
A, B = "plumless", "buckeroo"


def _row(nid: int, text: str, skey: str, seq: int):
    return (nid, text, "", "leaf", "org", 3, 0, 1.0, 0.01, 0.0, 0, skey, seq, 0.0, None, False, None, [])


def test_colliding_crc32_keys_stay_distinct_sessions() -> None:
    assert zlib.crc32(A.encode()) == zlib.crc32(B.encode())
    assert _session_int(A) != _session_int(B)
    assert _session_int("") == 0 and all(_session_int(k) > 0 for k in (A, B, "s", "0"))
    assert _session_int(A) == _session_int(A)  # stable


def test_turns_of_two_sessions_do_not_share_context_windows() -> None:
    idx = TenantIndex(4)
    recs = [_record(_row(1, "we booked the lake cabin", A, 1))[0],
            _record(_row(2, "the invoice is overdue", B, 2))[0]]
    idx.upsert_nodes(recs)
    locs = idx.locals_of([1, 2])
    assert [sorted(m) for m in idx.windows.neighbours(locs)] == [[int(locs[0])], [int(locs[1])]]
    # Nor does the window channel find node 2 through node 1's words.
    wq = idx.windows.query(["lake"], np.ones(idx.n, bool))
    assert wq.locals.tolist() == [int(locs[0])]
