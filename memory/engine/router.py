"""Query router: choose a question type and graph-diffusion depth from the query text alone.

The router never sees labels, gold answers or anything about the stored memories; it
reads only the wording of the question, so it behaves the same in production and in
benchmarks. Rules are checked in order and the first match wins:

1. temporal  - the answer is a time: "When did...", "What year...", "How long ago...", "How long has...";
               not a duration asked in the present or future ("How long do tokens last?", "How
               long will the migration take?"): that question goes on through the other rules.
2. reasoning - hypothetical ("would", "might", "likely"...), causal ("why", "what made"),
               comparative / multi-entity ("X and Y", "both", "in common", "what ... and ..."),
               or aggregating ("What activities...", "What are...", "How many...").
3. detail    - a single-fact wh- or yes/no question ("Where did X...", "What is X's...").
4. open      - anything else (opinions, feelings, summaries, bare keywords).

Depth is how many hops the diffusion spreads from the lexical/vector seeds: single facts
sit in the seed leaf itself, while aggregation and inference need neighbouring leaves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memory.engine.text import extract_entities, has_time_expression, key_terms

__all__ = ["DEPTHS", "RoutePlan", "route", "is_time_question"]

# Diffusion depth per routing rule; kept as data so benchmarks can tune it without code changes.
DEPTHS: dict[str, int] = {
    "detail": 0,
    "temporal": 1,
    "open": 1,
    "causal": 2,
    "multi_entity": 2,
    "aggregate": 2,
    "hypothetical": 3,
}

# Which public qtype each rule reports.
_QTYPE: dict[str, str] = {
    "detail": "detail",
    "temporal": "temporal",
    "open": "open",
    "causal": "reasoning",
    "multi_entity": "reasoning",
    "aggregate": "reasoning",
    "hypothetical": "reasoning",
}


@dataclass(frozen=True)
class RoutePlan:
    """Routing decision for one query.

    ``rule`` names the heuristic that fired (for tracing and tuning ``DEPTHS``).
    """

    qtype: str  # 'temporal' | 'detail' | 'reasoning' | 'open'
    depth: int
    entities: tuple[str, ...]
    time_focus: bool
    wants_reason: bool
    terms: tuple[str, ...]
    rule: str = ""


# Politeness wrappers change nothing about what is asked ("Could you tell me where...").
_POLITE_RE = re.compile(
    r"^(?:(?:hey|hi|ok|okay|so|and|but|also|please)[\s,]+)*"
    r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:tell\s+me|remind\s+me|recall|say|check)\s*"
    r"|do\s+you\s+(?:know|remember|recall)\s*|tell\s+me\s*|remind\s+me\s*|i\s+(?:wonder|want\s+to\s+know)\s*)?",
    re.I,
)

# Auxiliaries of a question in the present or future tense: "How long do ...", "How many days will ...".
_NOW_OR_LATER = r"(?:'s\b|\s+(?:does|do|is|are|will|would|can|could|should|must|shall|may|might)\b)"

_TEMPORAL_RE = re.compile(
    r"^(?:when\b"
    r"|(?:what|which)\s+(?:exact\s+)?(?:date|day|time|year|month|week|weekend|season)\b"
    r"|(?:in|on|during|at|around|by)\s+(?:what|which)\s+(?:date|day|time|year|month|week|season|point|age)\b"
    # "How long" asks when for a past span ("How long has Aiko been volunteering?", "How long did
    # the outage last?": read off the dates of its start and end, or since when) and with "ago" or
    # "since"; in the present or future tense it asks a duration, a property stated as a fact
    # ("How long do JWT access tokens last?", "How long is the retention?", "How long will the
    # migration take?"), which no date answers. "How many days ..." likewise.
    rf"|how\s+long\b(?!{_NOW_OR_LATER})"
    r"|how\s+long\b.*\b(?:since|ago)\b"
    r"|how\s+often\b|how\s+recently\b|how\s+soon\b"
    rf"|how\s+many\s+(?:years|months|weeks|days|hours)\b(?!{_NOW_OR_LATER})"
    r"|since\s+when\b|around\s+when\b|at\s+what\s+(?:age|time|point)\b)"
    r"|\bwhen\s+(?:did|does|do|is|was|were|will|has|had|have)\b|\bhow\s+long\s+ago\b|\bwhat\s+date\b",
    re.I,
)

_HYPOTHETICAL_RE = re.compile(
    r"\b(?:would|might|could|likely|unlikely|probably|possibly|perhaps|if|hypothetically|suppose|supposing"
    r"|imagine|considered?|potential(?:ly)?|predict|expect(?:ed)?|guess|should|be\s+interested)\b",
    re.I,
)

_CAUSAL_RE = re.compile(
    r"\bwhy\b|\bhow\s+come\b|\bwhat\s+(?:made|makes|caused|causes|led|leads|motivated|motivates|inspired"
    r"|inspires|prompted|drove|drives|pushed)\b|\breasons?\b|\bbecause\b|\bmotivation\b",
    re.I,
)

_MULTI_CUE_RE = re.compile(
    r"\b(?:both|in\s+common|together|each\s+other|one\s+another|compare[ds]?|comparison|differ(?:ent|ence|s)?"
    r"|similar(?:ities|ity)?|share[ds]?|between|neither|either)\b",
    re.I,
)

_AGGREGATE_RE = re.compile(
    r"^(?:what|which|who)\s+(?:are|were|have\s+been)\b"
    r"|\b(?:kinds?|types?|sorts?|forms?)\s+of\b"
    r"|\b(?:how\s+many|how\s+much|number\s+of|list|name\s+(?:some|all|the)|all\s+the|various"
    r"|some\s+of|what\s+are\s+some)\b",
    re.I,
)

_WH_START_RE = re.compile(
    r"^(?:what|where|who|whom|whose|which|how|did|does|do|is|was|are|were|has|have|had|can|will|whats)\b",
    re.I,
)

# Opinion/feeling questions need surrounding conversation, not a single fact.
_OPEN_CUE_RE = re.compile(
    r"\b(?:feel|feels|felt|feeling|think|thinks|thought|thoughts|opinion|view|views|believe|believes"
    r"|attitude|react|reacted|reaction|describe|summari[sz]e|tell\s+me\s+about|going\s+on|up\s+to"
    r"|doing|been\s+up\s+to|how\s+is|how\s+are|how\s+was|how\s+has)\b",
    re.I,
)

# Time-related wording that should raise the weight of temporal silks even in non-temporal questions.
_TIME_CUE_RE = re.compile(
    r"\b(?:before|after|since|until|recent(?:ly)?|latest|earliest|first|last\s+time|most\s+recent|ago"
    r"|during|previous(?:ly)?|later|earlier|anymore|still|now|currently|these\s+days|over\s+time|changed"
    r"|date|dates|year|years|month|months|week|weeks)\b",
    re.I,
)

# Words that describe the *question*, not the content sought; excluded from search terms.
_QUESTION_NOISE = frozenset(
    """
    date dates likely unlikely probably possibly considered consider kind kinds type types sort sorts
    name names list many long often reason reasons common compare both happen happened happens
    exactly exact specific particular recently remember recall tell ways
    """.split()
)

# Auxiliaries and pronouns that follow "what/which" in non-aggregating questions.
_NOT_PLURAL = frozenset(
    "is was has does did its this his hers yours ours theirs us always perhaps whats".split()
)


def _normalise(query: str) -> str:
    q = " ".join(query.replace("\u2019", "'").split())
    return _POLITE_RE.sub("", q, count=1).strip() or q


def _plural_head(q: str) -> bool:
    """True for "What books ...", "Which outdoor activities ...": a plural noun right after what/which.

    Case is kept so that names ending in "s" ("what Ines studied") are not read as plurals.
    """
    m = re.match(
        r"^(?:what|which)\s+(?:(?:kinds?|types?|sorts?)\s+of\s+)?([A-Za-z'-]+)(?:\s+([A-Za-z'-]+))?", q, re.I
    )
    if not m:
        return False
    for word in (m.group(1), m.group(2)):
        if not word or word[0].isupper() or word in _NOT_PLURAL or "'" in word:
            return False
        if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is", "ous")):
            return True
    return False


def _entity_pair(query: str, entities: list[str]) -> bool:
    """True when two extracted entities are coordinated: "Caroline and Melanie", "Jon or Gina"."""
    if len(entities) < 2:
        return False
    alt = "|".join(re.escape(e) for e in sorted(entities, key=len, reverse=True))
    return bool(re.search(rf"(?:{alt})(?:'s)?\s*(?:,|and|&|or|,\s*and)\s+(?:{alt})", query))


def _select_rule(q: str, entities: list[str]) -> str:
    low = q.lower()
    if _TEMPORAL_RE.search(low):
        return "temporal"
    if _HYPOTHETICAL_RE.search(low):
        return "hypothetical"
    if _CAUSAL_RE.search(low):
        return "causal"
    if (
        len(entities) >= 3
        or _entity_pair(q, entities)
        or _MULTI_CUE_RE.search(low)
        or (re.match(r"^(?:what|which|who)\b", low) and re.search(r"\band\b", low))
    ):
        return "multi_entity"
    if _AGGREGATE_RE.search(low) or _plural_head(q):
        return "aggregate"
    if _OPEN_CUE_RE.search(low):
        return "open"
    if _WH_START_RE.match(low):
        return "detail"
    return "open"


def is_time_question(query: str) -> bool:
    """True when the answer sought is a time ("When did...", "How long ago...", "How long has...").

    A duration asked in the present or future ("How long do JWT access tokens last?") is not: its
    answer is a stated fact, and the "when" bonus lifted a dated line that merely shared a word
    ("... last weekend") above it."""
    return bool(_TEMPORAL_RE.search(_normalise(query).lower()))


def route(query: str) -> RoutePlan:
    """Route ``query`` to a qtype and diffusion depth using only its wording.

    ``entities`` are the capitalised names in the query; ``terms`` its content words
    minus question scaffolding; ``time_focus`` is set for temporal questions and for any
    question mentioning a time or ordering ("last year", "before", "still");
    ``wants_reason`` for causal and hypothetical questions, whose answers need evidence
    gathered from several memories rather than one quoted fact.
    """
    q = _normalise(query)
    entities = extract_entities(q)
    rule = _select_rule(q, entities)
    time_focus = rule == "temporal" or has_time_expression(q) or bool(_TIME_CUE_RE.search(q))
    wants_reason = rule in {"causal", "hypothetical"} or bool(_CAUSAL_RE.search(q))
    terms = tuple(t for t in key_terms(q, n=16) if t not in _QUESTION_NOISE)[:12]
    return RoutePlan(
        qtype=_QTYPE[rule],
        depth=DEPTHS[rule],
        entities=tuple(entities),
        time_focus=time_focus,
        wants_reason=wants_reason,
        terms=terms,
        rule=rule,
    )
