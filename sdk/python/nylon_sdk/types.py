"""Typed results, and the turns sent. Each result keeps the decoded JSON in ``raw`` so fields added
by newer servers are not lost; unknown keys are ignored when building the dataclass. A turn is the
other way round: what the user wrote, so a key the API does not take is refused, not ignored."""

from __future__ import annotations

import difflib
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace
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


# What the API takes for a turn of weave / weave-session / bulk (memory/apis.py, TurnInput and
# _TURN_FIELDS), and what it takes only for the whole request. A turn dict with any other key is
# refused here: the API refuses it too (400 "Unknown field."), and dropping it instead stored a turn
# marked private with the writer's default visibility, readable by the whole org.
TURN_FIELDS = ("text", "speaker", "occurred_at", "event_id", "caption", "metadata")
# Request-level on the API, but meaningful per turn: a turn may name them, and weave_session sends
# them as the request's when every turn of the call agrees (request_scope), else refuses the call.
SCOPE_FIELDS = ("visibility", "team_id")
REQUEST_FIELDS = ("session_key", "turns", "end_session")


class TurnFieldError(ValueError):
    """A turn the SDK refuses before sending anything: an unknown field (``field``), or a
    visibility/team_id that differs from the other turns' or the request's. ``index`` is the
    turn's position in the call (None when unknown)."""

    def __init__(self, detail: str, *, field: str, index: int | None = None, where: str = ""):
        super().__init__(f"{where}: {detail}" if where else detail)
        self.detail = detail  # the message without the turn's place, for a caller that names it its way
        self.field = field
        self.index = index


def unknown_turn_field(name: object) -> TurnFieldError:
    """The error for a turn key the API does not take, naming it and, for a typo, the field meant."""
    name = str(name)
    if name in REQUEST_FIELDS:
        hint = f"{name} is a field of the whole request, not of a turn"
    else:
        close = difflib.get_close_matches(name, TURN_FIELDS + SCOPE_FIELDS, n=1)
        hint = (f"did you mean {close[0]!r}? " if close else "") + "a turn takes " + ", ".join(
            TURN_FIELDS + SCOPE_FIELDS)
    return TurnFieldError(f"unknown turn field {name!r} ({hint})", field=name)


@dataclass
class Turn:
    """One turn to weave. ``visibility`` and ``team_id`` are the API's for a whole request: a turn
    that names them is written with them, and turns that disagree are not sent in one call
    (``request_scope``); None means the request's (its argument, else the writer's default)."""

    text: str
    speaker: str = ""
    occurred_at: datetime | str | None = None
    event_id: str = ""
    caption: str = ""
    metadata: dict = field(default_factory=dict)
    visibility: str | None = None
    team_id: int | None = None

    def to_json(self) -> dict:
        """The turn as the API takes it: its own fields only (the scope goes on the request)."""
        d = {name: getattr(self, name) for name in TURN_FIELDS}
        if isinstance(self.occurred_at, datetime):
            d["occurred_at"] = self.occurred_at.isoformat()
        return {k: v for k, v in d.items() if v not in (None, "", {})} | {"text": self.text}

    @classmethod
    def coerce(cls, value: Turn | str | dict) -> Turn:
        """A ``Turn`` from a str (its text), a dict of turn fields, or a Turn. A dict key the API
        does not take is a ``TurnFieldError`` naming it, never dropped."""
        if isinstance(value, Turn):
            return value
        if isinstance(value, str):
            return cls(text=value)
        if isinstance(value, dict):
            for name in value:
                if name not in TURN_FIELDS and name not in SCOPE_FIELDS:
                    raise unknown_turn_field(name)
            if "text" not in value:
                raise TurnFieldError("a turn needs a text", field="text")
            return cls(**value)
        raise TypeError(f"a turn is a str, dict or Turn, not {type(value).__name__}")


def request_scope(turns: list[Turn], *, visibility: str | None = None, team_id: int | None = None,
                  request: Callable[[str], str] | None = None, where: Callable[[int], str] | None = None) -> dict:
    """The ``visibility`` and ``team_id`` to send with ``turns`` in one request: the arguments, or
    what the turns name. The API takes them for the whole request only, so a turn whose own value
    (None: the request's) differs from the argument's, or from the other turns' when there is no
    argument, is a ``TurnFieldError`` naming the turn: sent, it would be written with another
    turn's visibility, and dropped, with the writer's default (a private turn readable by the org).

    ``request`` and ``where`` word the error for a caller (the CLI: its flags, ``file:line``)."""
    request = request or (lambda name: f"the {name} argument")
    where = where or (lambda i: f"turn {i}")
    out: dict = {}
    for name, given in (("visibility", visibility), ("team_id", team_id)):
        if given is not None:
            ref, ref_label = given, f"{request(name)} ({given!r})"
            check = [(i, getattr(t, name)) for i, t in enumerate(turns) if getattr(t, name) is not None]
        elif turns:
            ref = getattr(turns[0], name)
            ref_label = f"{where(0)}'s " + (f"({ref!r})" if ref is not None else "(none: the request's default)")
            check = [(i, getattr(t, name)) for i, t in enumerate(turns)]
        else:
            ref, check = None, []
        for i, value in check:
            if value != ref:
                shown = repr(value) if value is not None else "none (the request's default)"
                raise TurnFieldError(
                    f"{name} {shown} differs from {ref_label}: the API takes one {name} for a whole request, "
                    f"so every turn sent together must have the same; write turns of another {name} separately",
                    field=name, index=i, where=where(i))
        out[name] = ref
    return out


def with_event_ids(session_key: str, turns: Iterable[Turn | str | dict], *, prefix: str = "auto-") -> list[Turn]:
    """``turns`` with an ``event_id`` on each turn that has none, so that sending them again (a
    retry whose answer was lost, a re-run of an import) is an idempotent replay: the server answers
    200 and writes nothing. A turn's own ``event_id`` is kept.

    The id is a hash of the session key, the turn's speaker, text and caption, and which repeat of
    that content in ``turns`` it is (not its line number: a turn inserted earlier does not move the
    ids of those after it). So a turn whose text, caption or speaker changed gets a new id and is
    written as a new memory (the old one stays) rather than refused as a 409 ``event_id_reused``,
    and the same turns sent to another session are new memories there (event_ids are unique per
    writer across sessions). A turn's ``occurred_at`` is not in the id (ids made before stay the
    same): a turn sent again with another ``occurred_at``, or a request naming another
    ``visibility`` or ``team_id`` than the turns were stored with, is a 409 ``event_id_reused`` that
    writes nothing. Derive over the whole input before splitting it into batches."""
    repeats: Counter[tuple[str, str, str]] = Counter()
    out = []
    for turn in map(Turn.coerce, turns):
        if turn.event_id:
            out.append(turn)
            continue
        content = (turn.speaker, turn.text, turn.caption)  # what the server compares on a replay
        nth = repeats[content]
        repeats[content] += 1
        key = json.dumps([session_key, *content, nth], ensure_ascii=False)
        out.append(replace(turn, event_id=prefix + hashlib.sha256(key.encode()).hexdigest()[:32]))
    return out


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
    disputed_by: list = field(default_factory=list)  # [{"node_id", "occurred_at"}]: open conflicts, oldest first
    occurred_at: str | None = None  # when it happened (ISO 8601)
    speaker: str = ""
    matched: bool = False  # matches the query by its words or close in meaning (only these are reinforced)
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
class RecallItem:
    """One recalled memory of a context, in relevance order: its ``[memory N]`` line's parts.
    Still readable as the dict it used to be (``item["text"]``, ``item.get("speaker")``), over the
    decoded JSON (``raw``)."""

    node_id: int
    text: str
    score: float = 0.0
    truncated: bool = False
    matched: bool = True  # shares a distinctive word with the query, or is close in meaning
    occurred_at: str | None = None
    speaker: str = ""
    derived: str = ""  # "model_answer": a model's reply written back by the proxy
    disputed_by: list = field(default_factory=list)
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: dict) -> RecallItem:
        return _pick(cls, d)

    # dict access, for code written when recall items were plain dicts
    def __getitem__(self, key: str):
        if key in self.raw:
            return self.raw[key]
        if key in {f.name for f in fields(self)} - {"raw"}:
            return getattr(self, key)
        raise KeyError(key)

    def get(self, key: str, default=None):
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return key in self.raw

    def keys(self):
        return self.raw.keys()


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
    tool_assets: list = field(default_factory=list)  # assets bound in tool mode: read through memory_get
    recall: list[RecallItem] = field(default_factory=list)
    # True when memories were recalled and none matches the query (the text says so above the lines)
    no_match: bool = False
    # what the budget cut and left out, per part; the limits applied; degraded dependencies and why
    truncated: dict = field(default_factory=dict)
    dropped: dict = field(default_factory=dict)
    budget: dict = field(default_factory=dict)
    degraded: list = field(default_factory=list)
    degraded_reasons: dict = field(default_factory=dict)
    memory_call_budget: int | None = None  # memory tool calls the guide allows the model per answer
    raw: dict = field(default_factory=dict, repr=False)

    @property
    def scenarios(self) -> list:
        return self.scenario_index

    @classmethod
    def from_json(cls, d: dict) -> Context:
        return _pick(cls, d, recall=[RecallItem.from_json(r) for r in d.get("recall") or []])


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
