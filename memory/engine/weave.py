"""Heuristic weaving: the six silks of a turn when no LLM is configured, and the lexical document
a node is indexed under. Pure functions: the Django write path and the benchmark harness share
them, so what is measured is what is served."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from .text import date_terms, emotion, extract_entities, key_terms, resolve_times, session_date_terms

__all__ = ["Silks", "weave_silks", "lexical_document", "days", "EDGE_WEIGHTS", "turn_text"]

# NylonME: auto-built edges 0.5, bridges 0.8, explicit links 1.0.
EDGE_WEIGHTS = {
    "temporal_next": 0.5,
    "same_session": 0.3,
    "entity": 0.5,
    "similar": 0.5,
    "derived": 0.5,
    "bridge": 0.8,
    "contradicts": 0.5,
    "supersedes": 0.5,
    "explicit": 1.0,
}


@dataclass(frozen=True, slots=True)
class Silks:
    fact: str
    entities: list[str]
    tags: list[str]
    valence: float
    intensity: float
    time_refs: list[dict] = field(default_factory=list)
    time_terms: str = ""


def turn_text(text: str, caption: str | None = None) -> str:
    """A turn's verbatim text, with a shared image's caption kept beside it."""
    text = (text or "").strip()
    if caption:
        return f"{text} [image: {caption.strip()}]".strip()
    return text


def weave_silks(text: str, *, occurred_at: datetime | date | None) -> Silks:
    mentions = resolve_times(text, occurred_at) if occurred_at is not None else []
    emo = emotion(text)
    entities = extract_entities(text)
    return Silks(
        fact=text,
        entities=entities,
        tags=key_terms(text, 8, entities=entities),
        valence=emo.valence,
        intensity=emo.intensity,
        time_refs=[
            {"surface": m.surface, "start": m.start.isoformat(), "end": m.end.isoformat(),
             "granularity": m.granularity}
            for m in mentions
        ],
        time_terms=date_terms(mentions) if mentions else "",
    )


def lexical_document(text: str, *, speaker: str = "", occurred_at: datetime | None = None,
                     time_terms: str = "") -> str:
    """What BM25 indexes for a node: speaker, verbatim text, the session date and resolved times,
    so "when did X …" questions can meet the answer's date in words."""
    parts = [speaker, text]
    if occurred_at is not None:
        parts.append(session_date_terms(occurred_at))
    if time_terms:
        parts.append(time_terms)
    return " ".join(p for p in parts if p)


def days(dt: datetime | None) -> float:
    """Days since the Unix epoch (the engine's time unit)."""
    if dt is None:
        return math.nan
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp() / 86400.0
