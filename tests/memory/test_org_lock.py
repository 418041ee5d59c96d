"""The per-org readers-writer lock of the engine cache: queries of one org run together, a
catch-up runs alone, and a waiting catch-up is not starved by a stream of queries."""

from __future__ import annotations

import threading
import time

from memory.cache import OrgLock


def test_readers_share_the_lock():
    lock = OrgLock()
    inside = threading.Barrier(3, timeout=5)  # passes only if all three readers are in at once

    def reader():
        with lock.read():
            inside.wait()

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert not inside.broken and all(not t.is_alive() for t in threads)


def test_a_writer_excludes_readers_and_other_writers():
    lock = OrgLock()
    active = {"r": 0, "w": 0}
    seen = []
    guard = threading.Lock()

    def work(kind: str):
        ctx = lock.write() if kind == "w" else lock.read()
        with ctx:
            with guard:
                active[kind] += 1
                seen.append(dict(active))
            time.sleep(0.002)
            with guard:
                active[kind] -= 1

    threads = [threading.Thread(target=work, args=("w" if i % 3 == 0 else "r",)) for i in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(seen) == 30
    assert all(s["w"] <= 1 for s in seen)
    assert all(not (s["w"] and s["r"]) for s in seen)


def test_a_waiting_writer_blocks_new_readers():
    lock = OrgLock()
    order = []
    first_in = threading.Event()
    release_first = threading.Event()

    def first_reader():
        with lock.read():
            first_in.set()
            release_first.wait(5)
        order.append("r1 out")

    def writer():
        with lock.write():
            order.append("w")

    def late_reader():
        with lock.read():
            order.append("r2")

    t1 = threading.Thread(target=first_reader)
    t1.start()
    first_in.wait(5)
    tw = threading.Thread(target=writer)
    tw.start()
    deadline = time.monotonic() + 5
    while not lock._writers_waiting and time.monotonic() < deadline:
        time.sleep(0.001)
    t2 = threading.Thread(target=late_reader)
    t2.start()
    time.sleep(0.05)
    assert order == []  # the late reader queues behind the waiting writer, not beside the first reader
    release_first.set()
    for t in (t1, tw, t2):
        t.join(5)
    assert order.index("w") < order.index("r2")
