"""Typed results. Each keeps the decoded JSON in ``raw`` so fields added by newer servers are
not lost; unknown keys are ignored when building the dataclass."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def _pick(cls, data: dict, **extra) -> Any:
    names = {f.name for f in fields(cls)}
    kw = {k: v for k, v in data.items() if k in names}
    kw.update(extra)
    if "raw" in names:
        kw["raw"] = data
    return cls(**kw)


@dataclass
class Turn:
    """One turn to weave."""

    text: str
    speaker: str = ""
    occurred_at: datetime | str | None = None
    event_id: str = ""
    caption: str = ""
    metadata: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        d = asdict(self)
        if isinstance(self.occurred_at, datetime):
            d["occurred_at"] = self.occurred_at.isoformat()
        return {k: v for k, v in d.items() if v not in (None, "", {})} | {"text": self.text}

    @classmethod
    def coerce(cls, value: Turn | str | dict) -> Turn:
        if isinstance(value, Turn):
            return value
        if isinstance(value, str):
            return cls(text=value)
        if isinstance(value, dict):
            return _pick(cls, value)
        raise TypeError(f"a turn is a str, dict or Turn, not {type(value).__name__}")


@dataclass
class WeaveResult:
    node_ids: list[int]
    event_ids: dict[str, int]
    created: int
    embedded: bool
    session_key: str
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: dict) -> WeaveResult:
        return _pick(cls, d)


@dataclass
class Explanation:
    """Why a hit came back: channel ranks, the seed and path it was reached by, the score parts."""

    channels: dict = field(default_factory=dict)
    seed: Any = None
    path: list = field(default_factory=list)
    hops: int = 0
    parts: dict = field(default_factory=dict)


@dataclass
class Hit:
    node_id: int
    score: float
    text: str
    kind: str
    explanation: Explanation
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: dict) -> Hit:
        return _pick(cls, d, explanation=_pick(Explanation, d.get("explanation") or {}))


@dataclass
class ResonateResult:
    hits: list[Hit]
    route: dict
    timing_ms: dict
    degraded: list[str]
    served_by: str
    truncated: bool
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: dict) -> ResonateResult:
        return _pick(cls, d, hits=[Hit.from_json(h) for h in d.get("hits", [])])


@dataclass
class Node:
    id: int
    kind: str
    text: str
    speaker: str = ""
    visibility: str = ""
    team_id: int | None = None
    owner: dict = field(default_factory=dict)
    silks: dict = field(default_factory=dict)
    confidence: float = 1.0
    created_at: str = ""
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: dict) -> Node:
        return _pick(cls, d)


@dataclass
class Conflict:
    id: int
    status: str
    reason: str = ""
    detector: str = ""
    node_a: dict = field(default_factory=dict)
    node_b: dict = field(default_factory=dict)
    kept_node_id: int | None = None
    resolved_by: str = ""
    resolved_at: str | None = None
    created_at: str = ""
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: dict) -> Conflict:
        return _pick(cls, d)


@dataclass
class Context:
    """The agent context (``/api/v1/context``), ordered by stability: ``stable`` (tool guide,
    persona in full, scenario index) then ``dynamic`` (recall for the query). ``stable_hash``
    changes only when the stable part changes: put ``stable`` first to keep a prompt cache hot."""

    stable_hash: str = ""
    stable: str = ""
    dynamic: str = ""
    context: str = ""
    language: str = "en"
    persona: list = field(default_factory=list)
    scenario_index: list = field(default_factory=list)
    recall: list = field(default_factory=list)
    # what the budget cut and left out, per part; the limits applied; degraded dependencies
    truncated: dict = field(default_factory=dict)
    dropped: dict = field(default_factory=dict)
    budget: dict = field(default_factory=dict)
    degraded: list = field(default_factory=list)
    raw: dict = field(default_factory=dict, repr=False)

    @property
    def scenarios(self) -> list:
        return self.scenario_index

    @classmethod
    def from_json(cls, d: dict) -> Context:
        return _pick(cls, d)


@dataclass
class Health:
    status: str
    checks: dict
    raw: dict = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def from_json(cls, d: dict) -> Health:
        checks = {k: v for k, v in d.items() if isinstance(v, dict)}
        return cls(status=str(d.get("status", "unknown")), checks=checks, raw=d)


@dataclass
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None
    raw: dict = field(default_factory=dict, repr=False)
