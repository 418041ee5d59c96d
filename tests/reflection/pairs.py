"""Checking the conflict rules on a pair of texts, both ways, as ``reflection.conflicts.detect``
runs them (shared by the rule tests: each had its own copy)."""

from __future__ import annotations

from collections.abc import Callable

from memory.engine.text import extract_entities
from reflection.heuristics import conflict_reason, only_counts_differ


def reason(a: str, b: str) -> str | None:
    """The rules' answer with the entities the write path passes."""
    return conflict_reason(a, b, extract_entities(a), extract_entities(b))


def verdict(a: str, b: str) -> str | None:
    """As ``detect`` runs the rules on two memories days apart (a status line's counts excused)."""
    if only_counts_differ(a, b):
        return None
    return reason(a, b)


def both_conflict(a: str, b: str, prefix: str | tuple[str, ...] = "",
                  rule: Callable[[str, str], str | None] = verdict) -> None:
    for x, y in ((a, b), (b, a)):
        said = rule(x, y)
        assert said is not None, (x, y)
        assert said.startswith(prefix), (x, y, said)


def both_none(a: str, b: str) -> None:
    for x, y in ((a, b), (b, a)):
        assert verdict(x, y) is None, (x, y, verdict(x, y))
