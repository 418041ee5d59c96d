"""How many context bundles the proxy builds at once, in all and for one org.

A build given up at the memory budget goes on in its thread until it finishes (a thread cannot be
interrupted), so builds are bounded by slots, not by the time the requests wait: a slot is taken
before a build is handed to its pool and given back when the build ends, however long after its
request went on without it. A request that finds no slot free skips its memory at once (fail-open)
instead of queueing a build behind the running ones. The per-org share keeps one org's flood from
taking every slot: the others' builds still find one."""

from __future__ import annotations

import threading


class BuildSlots:
    def __init__(self, total: int, per_org: int) -> None:
        if total < 1 or not 1 <= per_org <= total:
            raise ValueError(f"build slots: {total} in all, {per_org} per org")
        self.total, self.per_org = total, per_org
        self._lock = threading.Lock()
        self._running = 0
        self._by_org: dict[int, int] = {}

    def try_acquire(self, org_id: int) -> bool:
        """Take a slot for ``org_id`` if one is free to it; never waits."""
        with self._lock:
            held = self._by_org.get(org_id, 0)
            if self._running >= self.total or held >= self.per_org:
                return False
            self._running += 1
            self._by_org[org_id] = held + 1
            return True

    def release(self, org_id: int) -> None:
        """Called from whichever thread ends the build (its worker, or the one cancelling it)."""
        with self._lock:
            held = self._by_org.get(org_id, 0)
            if held <= 0:
                raise RuntimeError(f"build slot of org {org_id} released but not held")
            self._running -= 1
            if held == 1:
                del self._by_org[org_id]
            else:
                self._by_org[org_id] = held - 1

    def running(self, org_id: int | None = None) -> int:
        with self._lock:
            return self._running if org_id is None else self._by_org.get(org_id, 0)
