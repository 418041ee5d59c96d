"""Background memory work: session abstraction (leaves → atomic facts), idle reflection (facts →
bridges) and the beat tick that drives both from durable state in Postgres.

Idempotency: every write of a task happens in one transaction holding the session row lock, and
re-checks there what is already written. Facts carry ``event_id = fact:<session>:<upto seq>:<i>``
and bridges ``bridge:<session>:r<newest fact id reflected over>:<i>`` (unique per owner), so a
redelivered or concurrent task adds nothing twice, and a session reopened by new turns is
reflected again under keys of its own. LLM calls and embeddings run before that transaction,
never under a lock.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce
from django.db.models.lookups import GreaterThan
from django.utils import timezone

from assets import audit
from memory.embedding import get_embedder
from memory.engine.weave import EDGE_WEIGHTS, weave_silks
from memory.models import Edge, EdgeKind, MemorySession, Node, NodeKind, SourceKind, Visibility
from memory.nearest import nearest_sql, vector_literal
from nylon_project import events
from teams.models import Organization

from . import heuristics, llm
from .models import SessionWork

log = logging.getLogger("nylon.reflection")

TURNS_PER_CALL = 60
MAX_BRIDGES = 3
REFLECT_FACTS = 80  # facts shown to the LLM per reflection round
BRIDGE_DEDUP_COSINE = 0.9
VISIBILITY_RANK = {Visibility.ORG: 0, Visibility.TEAM: 1, Visibility.PRIVATE: 2, Visibility.RESTRICTED: 3}

ABSTRACT_SYSTEM = """TASK: abstract
You distil a conversation into atomic facts for a long-term memory.
Each fact is one short self-contained sentence in the third person: replace I/me/my with the
speaker's name, resolve relative dates ("yesterday", "last week") to absolute dates using the
turn's date, keep names, numbers and places exactly. Only what the conversation states: events,
decisions, preferences, plans, attributes. No greetings, no speculation.
source_turns lists the turn numbers (in brackets) each fact comes from.
Output JSON: {"facts": [{"text": "...", "source_turns": [0]}]}"""

ABSTRACT_SCHEMA = {
    "type": "object", "required": ["facts"],
    "properties": {"facts": {"type": "array", "maxItems": 300, "items": {
        "type": "object", "required": ["text", "source_turns"],
        "properties": {"text": {"type": "string", "minLength": 3, "maxLength": 1000},
                       "source_turns": {"type": "array", "maxItems": 50, "items": {"type": "integer"}}}}}},
}

REFLECT_SYSTEM = """TASK: reflect
You add neutral commonsense background knowledge that links the facts below, so that a later
question can reach them. Write 1 to 3 general statements of world knowledge (not about the
people, no judgement, no advice), each connected to at least one fact by its number.
Avoid vacuous statements such as "people have preferences".
Output JSON: {"bridges": [{"text": "...", "fact_ids": [123]}]}"""

REFLECT_SCHEMA = {
    "type": "object", "required": ["bridges"],
    "properties": {"bridges": {"type": "array", "maxItems": 5, "items": {
        "type": "object", "required": ["text", "fact_ids"],
        "properties": {"text": {"type": "string", "minLength": 3, "maxLength": 500},
                       "fact_ids": {"type": "array", "maxItems": 20, "items": {"type": "integer"}}}}}},
}


@dataclass
class FactDraft:
    text: str
    sources: list[Node] = field(default_factory=list)
    # Everything the writer (the LLM) was shown alongside the sources. Its citations are only a
    # claim: a fact citing an org turn may restate the private turn next to it, so its scope is
    # bounded by all of this too, not by the cited sources alone.
    shown: list[Node] = field(default_factory=list)
    # The fact's own source_kind when it differs from the run's (a heuristic fallback for one
    # chunk of an LLM abstraction).
    source: str = ""

    def scope(self) -> tuple[str, int | None]:
        return _scope_of(self.sources + self.shown)


def _owner_filter(obj) -> dict:
    return {"owner_user_id": obj.owner_user_id, "owner_agent_id": obj.owner_agent_id}


def _fail_session(session_id: int, error: str) -> None:
    MemorySession.objects.filter(pk=session_id).exclude(abstraction_status=MemorySession.Status.DONE).update(
        abstraction_status=MemorySession.Status.FAILED, abstraction_error=error[:2000])


def _session_leaves(session: MemorySession) -> list[Node]:
    return list(Node.objects.filter(org_id=session.org_id, session_key=session.key, kind=NodeKind.LEAF,
                                    deleted_at__isnull=True, **_owner_filter(session)).order_by("seq", "id"))


def work_for(session: MemorySession, *, lock: bool = False) -> SessionWork:
    qs = SessionWork.objects.select_for_update() if lock else SessionWork.objects
    work = qs.filter(session_id=session.pk).first()
    if work is None:
        SessionWork.objects.get_or_create(session_id=session.pk, defaults={"org_id": session.org_id})
        work = qs.get(session_id=session.pk)
    return work


def _covered_seq(session: MemorySession) -> int:
    """The highest leaf seq already abstracted."""
    upto = SessionWork.objects.filter(session_id=session.pk).values_list("abstracted_upto", flat=True).first()
    return -1 if upto is None else upto


def _cited_turns(facts: list[dict], n: int) -> list[list[int]]:
    """Each fact's cited turn indexes, 0-based. The prompt numbers turns from 0; a model numbering
    them from 1 cites n (which does not exist) and never 0, and read as 0-based would lose its facts
    on the last turn and pin every other fact on the turn before its own. Such an answer is shifted
    — only when it is unambiguous: every citation in 1..n, at least one n, none 0. Otherwise
    out-of-range citations are dropped (and counted)."""
    cited = [list(dict.fromkeys(f["source_turns"])) for f in facts]
    flat = {i for c in cited for i in c}
    if n in flat and 0 not in flat and all(1 <= i <= n for i in flat):
        return [[i - 1 for i in c] for c in cited]
    return cited


@dataclass
class LlmFacts:
    drafts: list[FactDraft]
    dropped: int = 0  # facts the LLM returned without a usable source turn
    problems: list[str] = field(default_factory=list)  # chunks whose answer was unusable


def _llm_facts(session: MemorySession, leaves: list[Node]) -> LlmFacts:
    out = LlmFacts([])
    for start in range(0, len(leaves), TURNS_PER_CALL):
        chunk = leaves[start:start + TURNS_PER_CALL]
        lines = [f"[{i}] {n.occurred_at.date().isoformat()} {n.speaker or 'someone'}: "
                 f"{' '.join(n.text.split())[:2000]}" for i, n in enumerate(chunk)]
        answer = llm.complete_json(org=session.org, system=ABSTRACT_SYSTEM, user="\n".join(lines),
                                   schema=ABSTRACT_SCHEMA, max_tokens=4096)
        usable: list[FactDraft] = []
        for f, cited in zip(answer["facts"], _cited_turns(answer["facts"], len(chunk)), strict=True):
            sources = [chunk[i] for i in cited if 0 <= i < len(chunk)]
            text = " ".join(f["text"].split())
            if sources and text:
                # Capped by the whole chunk rather than calling the LLM once per scope: per-scope
                # calls would cost more calls and split the conversation (an org reply loses the
                # private question it answers); a mixed chunk only makes its facts narrower.
                usable.append(FactDraft(text, sources, shown=chunk))
        out.dropped += len(answer["facts"]) - len(usable)
        if usable:
            out.drafts += usable
            continue
        # Nothing usable for this chunk. An empty answer is normal for small talk, which the
        # heuristic finds nothing in either; facts that cite no turn of the chunk, or no facts where
        # the heuristic finds events, are a degraded answer: the heuristic facts are written
        # instead, so the chunk is never silently left with zero facts, and it is recorded.
        fallback = _heuristic_facts(chunk)
        if answer["facts"] or fallback:
            turns = f"turns {chunk[0].seq}-{chunk[-1].seq}"
            why = (f"{len(answer['facts'])} facts, none citing a turn of the chunk" if answer["facts"]
                   else "no facts")
            out.problems.append(f"{turns}: {why}; {len(fallback)} heuristic facts written instead")
            for d in fallback:
                d.source = SourceKind.HEURISTIC
            out.drafts += fallback
    return out


def _heuristic_facts(leaves: list[Node]) -> list[FactDraft]:
    drafts = []
    for n in leaves:
        text = heuristics.heuristic_fact(n.text, n.speaker, n.occurred_at)
        if text:
            drafts.append(FactDraft(text, [n]))
    return drafts


def _scope_of(nodes: list[Node]) -> tuple[str, int | None]:
    """The most restrictive visibility among the sources (a fact never widens its leaves)."""
    vis = max((n.visibility for n in nodes), key=lambda v: VISIBILITY_RANK.get(v, 3))
    if vis == Visibility.TEAM:
        # Only team-scoped nodes decide the team: an org node beside them is readable by that
        # team anyway, so it must not push the fact down to private.
        teams = {n.team_id for n in nodes if n.visibility == Visibility.TEAM}
        return (Visibility.TEAM, teams.pop()) if len(teams) == 1 else (Visibility.PRIVATE, None)
    teams = {n.team_id for n in nodes}
    return vis, (teams.pop() if len(teams) == 1 else None)


def abstract_session(*, session_id: int) -> dict:
    """Distil the session's not-yet-abstracted leaves into facts. Idempotent per session."""
    session = MemorySession.objects.select_related("org").filter(pk=session_id).first()
    if session is None:
        return {"status": "missing"}
    if session.abstraction_status == MemorySession.Status.DONE:
        return {"status": "done", "facts": 0, "noop": True}
    covered = _covered_seq(session)
    leaves = [n for n in _session_leaves(session) if n.seq > covered]
    cfg = llm.config_for(session.org)
    source = SourceKind.LLM if cfg is not None else SourceKind.HEURISTIC
    try:
        got = _llm_facts(session, leaves) if cfg is not None else LlmFacts(_heuristic_facts(leaves))
    except llm.LlmError as exc:
        # abstraction_attempts counts the consecutive failures of the work still owed (a success
        # resets it), so a long-lived session keeps its full retry budget for each new round.
        attempts = session.abstraction_attempts + 1
        if attempts < settings.NYLON_ABSTRACTION_MAX_ATTEMPTS:
            # Never write zero facts silently: the session is FAILED, visibly, and the beat retries it.
            _fail_session(session.id, f"llm {exc.kind}: {exc}")
            MemorySession.objects.filter(pk=session.id).update(abstraction_attempts=attempts)
            log.warning("abstraction of session %s failed (attempt %d): %s", session.id, attempts, exc)
            return {"status": "failed", "error": exc.kind}
        # Given up on the LLM for these turns: they get the heuristic facts rather than none, and
        # the fallback shows (session note, background/status "fallback", the abstract state).
        got = LlmFacts(_heuristic_facts(leaves))
        for d in got.drafts:
            d.source = SourceKind.HEURISTIC
        problem = (f"llm {exc.kind}: gave up after {attempts} attempts ({exc}); "
                   f"{len(got.drafts)} heuristic facts written instead")
        log.warning("abstraction of session %s: %s", session.id, problem)
        llm.mark_degraded(session.org, "abstract", exc.kind, f"session {session.key}: {problem}")
        return _finish(session, leaves, covered, got, source=SourceKind.HEURISTIC, note=problem)
    note = ""
    if got.problems:
        # Visible where an LLM failure is: the LLM state (/healthz, background/status) and the
        # session's error text; the session itself is done, with the heuristic facts.
        note = f"llm unusable_answer: session {session.key}: " + "; ".join(got.problems)
        llm.mark_unusable(session.org, note)
        log.warning("abstraction of session %s: %s", session.id, note)
    return _finish(session, leaves, covered, got, source=source, note=note)


def _finish(session: MemorySession, leaves: list[Node], covered: int, got: LlmFacts, *, source: str,
            note: str) -> dict:
    drafts = got.drafts
    vectors = get_embedder().passages([d.text for d in drafts]) if drafts else None
    upto = max((n.seq for n in leaves), default=covered)
    return _write_facts(session_id=session.id, drafts=drafts, vectors=vectors, source=source, upto=upto,
                        dropped=got.dropped, note=note)


def _locked_session(session_id: int) -> MemorySession:
    """The session row, locked against other abstraction or reflection writes of it.

    FOR NO KEY UPDATE of the session alone. FOR UPDATE (of the session and, through
    select_related, its org) also blocked every insert whose foreign key names them, since such an
    insert takes KEY SHARE: a request stamping the session's SessionWork deadlocked with this
    transaction inserting the same row (seen three times in 17 minutes under load), and every node
    written to the org waited for the worker's transaction."""
    return MemorySession.objects.select_for_update(no_key=True, of=("self",)).select_related("org").get(pk=session_id)


def _live_drafts(session: MemorySession, drafts: list[tuple[int, FactDraft]]) -> list[tuple[int, FactDraft]]:
    """The drafts none of whose sources was deleted since they were read (outside the lock), with
    those sources locked against a delete until this transaction commits (``lock_live_sources``).
    A draft citing a deleted memory would restate it, and no delete would ever find it: the delete's
    cascade ran before it existed. Each keeps its index, so event ids stay stable."""
    from memory.services import lock_live_sources

    live = lock_live_sources(org_id=session.org_id, node_ids=[n.id for _, d in drafts for n in d.sources])
    return [(i, d) for i, d in drafts if all(n.id in live for n in d.sources)]


@transaction.atomic
def _write_facts(*, session_id: int, drafts: list[FactDraft], vectors, source: str, upto: int,
                 dropped: int = 0, note: str = "") -> dict:
    session = _locked_session(session_id)
    work = work_for(session, lock=True)
    if session.abstraction_status == MemorySession.Status.DONE or work.abstracted_upto >= upto >= 0:
        if session.abstraction_status != MemorySession.Status.DONE:  # re-marked, nothing new to do
            MemorySession.objects.filter(pk=session.pk).update(abstraction_status=MemorySession.Status.DONE,
                                                               abstraction_error="", abstraction_attempts=0)
        return {"status": "done", "facts": 0, "noop": True}  # another delivery got here first
    # A delivery that read fewer leaves may have written first (a redelivery racing the original,
    # each reading the session before the other's commit): the drafts it covered are written
    # already, and writing them again under this upto's event ids would duplicate those facts.
    # Re-checked here, under the lock; the original index keeps each event id stable.
    done = work.abstracted_upto
    todo = [(i, d) for i, d in enumerate(drafts) if max(n.seq for n in d.sources) > done]
    todo = _live_drafts(session, todo)
    now = timezone.now()
    facts: list[Node] = []
    for i, d in todo:
        vis, team_id = d.scope()
        occurred = max(n.occurred_at for n in d.sources)
        silks = weave_silks(d.text, occurred_at=occurred)
        vec = vectors[i] if vectors is not None else None
        facts.append(Node(
            org_id=session.org_id, **_owner_filter(session), team_id=team_id, visibility=vis,
            kind=NodeKind.FACT, text=d.text, fact=d.text, speaker=d.sources[0].speaker,
            entities=[e[:200] for e in silks.entities], tags=[t[:200] for t in silks.tags],
            occurred_at=occurred, session_key=session.key, seq=max(n.seq for n in d.sources),
            valid_from=occurred, time_refs=silks.time_refs, valence=silks.valence, intensity=silks.intensity,
            source_kind=d.source or source, event_id=f"fact:{session.id}:{upto}:{i}",
            source_node_ids=[n.id for n in d.sources],
            metadata={"session_id": str(session.id), "upto_seq": upto,
                      **({"time_terms": silks.time_terms} if silks.time_terms else {})},
            tension_updated_at=now, embedding=vec, embedded=vec is not None,
        ))
    Node.objects.bulk_create(facts)
    Edge.objects.bulk_create(
        [Edge(org_id=session.org_id, src_id=leaf.id, dst_id=f.id, kind=EdgeKind.DERIVED,
              weight=EDGE_WEIGHTS["derived"]) for f, (_, d) in zip(facts, todo, strict=True) for leaf in d.sources],
        ignore_conflicts=True,
    )
    session.abstraction_status = MemorySession.Status.DONE
    session.abstraction_error = note[:2000]  # empty unless the LLM's answer was replaced by heuristics
    session.abstraction_attempts = 0  # the work is done: the next round starts a budget of its own
    fields = ["abstraction_status", "abstraction_error", "abstraction_attempts"]
    work.abstracted_upto = max(work.abstracted_upto, upto)
    work.facts += len(facts)
    if facts and session.reflection_status == MemorySession.Status.DONE:
        # New facts owe a new reflection round (turns sent with end_session on an ended session do
        # not reopen reflection on the write path), with an attempt budget of its own: the cap is
        # per round, not per session's lifetime.
        session.reflection_status = MemorySession.Status.OPEN
        fields.append("reflection_status")
        work.reflection_attempts = 0
    session.save(update_fields=fields)
    work.save(update_fields=["abstracted_upto", "facts", "reflection_attempts", "updated_at"])
    # The session's row id, not its key: org admins read the audit, and a private session's key is
    # its owner's (as memory.weave records it).
    audit.record(actor=None, org=session.org, action="memory.abstract", object_type="session",
                 object_id=session.id, detail={"facts": len(facts), "source": source, "upto_seq": upto,
                                                **({"dropped": dropped} if dropped else {}),
                                                **({"degraded": note[:500]} if note else {})})
    if facts:
        events.publish(session.org_id, "memory.abstracted", {"session_key": session.key,
                                                             "node_ids": [f.id for f in facts][:50]})
        from memory.services import followup_create

        followup_create(org_id=session.org_id, node_ids=[f.id for f in facts])
    result = {"status": "done", "facts": len(facts), "source": source}
    if dropped:
        result["dropped"] = dropped
    if note:
        result["fallback"] = sum(1 for _, d in todo if d.source == SourceKind.HEURISTIC)
    return result


# --------------------------------------------------------------------------------------------
# idle reflection


_VACUOUS = ("people have", "people like", "people can", "everyone", "some people", "things", "it is what",
            "life is", "humans have")


def is_vacuous(text: str) -> bool:
    words = text.split()
    low = text.lower().strip(" .")
    if len(words) < 6:
        return True
    return any(low.startswith(p) for p in _VACUOUS) and len(words) < 9


def _session_facts(session: MemorySession) -> list[Node]:
    return list(Node.objects.filter(org_id=session.org_id, kind=NodeKind.FACT, deleted_at__isnull=True,
                                    metadata__session_id=str(session.id)).order_by("id"))


def _reflection_outcome(session: MemorySession, status: str, detail: str, bridges: int = 0,
                        driver: str | None = None) -> None:
    work = work_for(session)
    SessionWork.objects.filter(pk=work.pk).update(
        reflection=status, reflection_detail=detail[:500], bridges=bridges,
        reflection_attempts=work.reflection_attempts + 1, updated_at=timezone.now())
    if driver is not None:
        MemorySession.objects.filter(pk=session.pk).update(reflection_status=driver)


def reflect_session(*, session_id: int) -> dict:
    """Distil 1-3 commonsense bridges from a session's facts (LLM only). Idempotent per session."""
    session = MemorySession.objects.select_related("org").filter(pk=session_id).first()
    if session is None:
        return {"status": "missing"}
    if session.reflection_status == MemorySession.Status.DONE:
        work = SessionWork.objects.filter(session_id=session.pk).values_list("reflection", "reflection_detail").first()
        if work is not None and work[0] == SessionWork.Reflection.SKIPPED:
            return {"status": "skipped", "detail": work[1], "noop": True}
        return {"status": "done", "noop": True}
    S = MemorySession.Status
    if llm.config_for(session.org) is None:
        # Final, as the tick's skip (``_skip_reflections``): left OPEN it was reconsidered every tick.
        _reflection_outcome(session, SessionWork.Reflection.SKIPPED, "skipped: no LLM", driver=S.DONE)
        return {"status": "skipped", "detail": "skipped: no LLM"}
    facts = _session_facts(session)
    if not facts:
        _reflection_outcome(session, SessionWork.Reflection.DONE, "no facts to reflect on", driver=S.DONE)
        return {"status": "done", "bridges": 0}
    # The newest facts: a session reopened by new turns is reflected again over what it gained.
    shown = facts[-REFLECT_FACTS:]
    round_key = _round_key(session, shown)
    if _round_written(session, round_key):
        # This round's bridges are already written (a redelivery after the session was re-marked,
        # or reopened without new facts): nothing new to reflect on, and no paid call.
        _reflection_outcome(session, SessionWork.Reflection.DONE, "already reflected over these facts",
                            driver=S.DONE)
        return {"status": "done", "noop": True}
    lines = "\n".join(f"[{f.id}] {f.text}" for f in shown)
    try:
        out = llm.complete_json(org=session.org, system=REFLECT_SYSTEM, user=lines, schema=REFLECT_SCHEMA,
                                max_tokens=800)
    except llm.LlmError as exc:
        _reflection_outcome(session, SessionWork.Reflection.FAILED, f"llm {exc.kind}: {exc}", driver=S.FAILED)
        return {"status": "failed", "error": exc.kind}
    by_id = {f.id: f for f in facts}
    drafts = []
    for b in out["bridges"][:MAX_BRIDGES]:
        text = " ".join(b["text"].split())
        linked = [by_id[i] for i in dict.fromkeys(b["fact_ids"]) if i in by_id]
        if linked and not is_vacuous(text):
            drafts.append(FactDraft(text, linked, shown=shown))  # the LLM saw all of them
    vectors = get_embedder().passages([d.text for d in drafts]) if drafts else None
    return _write_bridges(session_id=session.id, drafts=drafts, vectors=vectors, round_key=round_key)


def _round_key(session: MemorySession, shown: list[Node]) -> str:
    """The event-id prefix of one reflection round. A reopened session is reflected again, so
    ``bridge:<session>:<i>`` alone would collide with the first round's bridges (an IntegrityError,
    rolled back, retried with a paid call every tick); the newest fact reflected over names the
    round: new facts make a new round, a redelivery of the same round the same keys."""
    return f"bridge:{session.id}:r{max(f.id for f in shown)}:"


def _round_written(session: MemorySession, round_key: str) -> bool:
    return Node.objects.filter(org_id=session.org_id, **_owner_filter(session), kind=NodeKind.BRIDGE,
                               event_id__startswith=round_key).exists()


def _near_bridge(session: MemorySession, vec) -> bool:
    where = """m.org_id = %(org)s AND m.kind = 'bridge' AND m.deleted_at IS NULL AND m.embedding IS NOT NULL
               AND m.owner_user_id IS NOT DISTINCT FROM %(user)s
               AND m.owner_agent_id IS NOT DISTINCT FROM %(agent)s"""
    with connection.cursor() as cur:
        cur.execute(
            f"""SELECT n.sim FROM ({nearest_sql(where=where, query="%(vec)s::vector", limit="1")}) n""",
            {"org": session.org_id, "user": session.owner_user_id, "agent": session.owner_agent_id,
             "vec": vector_literal(vec)},
        )
        row = cur.fetchone()
    return row is not None and row[0] >= BRIDGE_DEDUP_COSINE


@transaction.atomic
def _write_bridges(*, session_id: int, drafts: list[FactDraft], vectors, round_key: str) -> dict:
    session = _locked_session(session_id)
    if session.reflection_status == MemorySession.Status.DONE:
        return {"status": "done", "noop": True}
    if _round_written(session, round_key):  # re-checked under the lock: another delivery wrote it
        _reflection_outcome(session, SessionWork.Reflection.DONE, "already reflected over these facts",
                            driver=MemorySession.Status.DONE)
        return {"status": "done", "noop": True}
    now = timezone.now()
    made: list[tuple[Node, FactDraft]] = []
    kept_vecs: list[np.ndarray] = []
    for i, d in _live_drafts(session, list(enumerate(drafts))):
        vec = vectors[i] if vectors is not None else None
        if vec is not None:
            if _near_bridge(session, vec) or any(float(np.dot(vec, k)) >= BRIDGE_DEDUP_COSINE for k in kept_vecs):
                continue
            kept_vecs.append(vec)
        vis, team_id = d.scope()
        silks = weave_silks(d.text, occurred_at=None)
        node = Node(
            org_id=session.org_id, **_owner_filter(session), team_id=team_id, visibility=vis,
            kind=NodeKind.BRIDGE, text=d.text, fact=d.text, entities=[e[:200] for e in silks.entities],
            tags=[t[:200] for t in silks.tags], occurred_at=max(n.occurred_at for n in d.sources),
            session_key=session.key, source_kind=SourceKind.REFLECTION, event_id=f"{round_key}{i}",
            source_node_ids=[n.id for n in d.sources], metadata={"session_id": str(session.id)},
            confidence=0.6, t0=0.6, lam=0.01, tension_updated_at=now, embedding=vec, embedded=vec is not None,
        )
        made.append((node, d))
    Node.objects.bulk_create([n for n, _ in made])
    Edge.objects.bulk_create(
        [Edge(org_id=session.org_id, src_id=f.id, dst_id=n.id, kind=EdgeKind.BRIDGE, weight=0.8)
         for n, d in made for f in d.sources], ignore_conflicts=True)
    _reflection_outcome(session, SessionWork.Reflection.DONE, f"{len(made)} bridges", bridges=len(made),
                        driver=MemorySession.Status.DONE)
    audit.record(actor=None, org=session.org, action="memory.reflect", object_type="session",
                 object_id=session.id, detail={"bridges": len(made), "proposed": len(drafts)})
    return {"status": "done", "bridges": len(made)}


# --------------------------------------------------------------------------------------------
# the beat tick


# Older than any write: what a session whose owner has no leaf at all compares as.
_NEVER = datetime(1970, 1, 1, tzinfo=UTC)


def _owner_wrote_since(cut, *, same_session: bool = False) -> Q:
    """Sessions whose owner (or, with same_session, the session itself) got a leaf after ``cut``.
    Owner columns are nullable, so user- and agent-owned sessions are matched separately.

    Read as "the newest leaf was written after cut", one row through the ``(org, owner, -id)``
    index (or ``(org, session_key, seq)`` for the session): "any leaf written after cut" has no
    index on ``created_at`` to use, and Postgres answered it with a scan of every node of every
    org, each tick. Ids (seqs in a session) follow write order up to concurrent writes of one
    owner, seconds apart, against idle windows of minutes."""
    extra = {"session_key": OuterRef("key")} if same_session else {}
    newest = "-seq" if same_session else "-id"
    base = Node.objects.filter(org_id=OuterRef("org_id"), kind=NodeKind.LEAF, **extra).order_by(newest)
    by_agent = Subquery(base.filter(owner_agent_id=OuterRef("owner_agent_id")).values("created_at")[:1])
    by_user = Subquery(base.filter(owner_user_id=OuterRef("owner_user_id")).values("created_at")[:1])
    return ((Q(owner_agent_id__isnull=False) & GreaterThan(Coalesce(by_agent, Value(_NEVER)), cut))
            | (Q(owner_user_id__isnull=False) & GreaterThan(Coalesce(by_user, Value(_NEVER)), cut)))


def tick(*, now=None) -> dict:
    """End idle sessions, (re)enqueue pending or failed abstractions, start idle reflection.
    Returns the session ids per task; enqueues them when NYLON_ENQUEUE_TASKS is on."""
    S = MemorySession.Status
    now = now or timezone.now()
    idle_cut = now - timedelta(seconds=settings.NYLON_SESSION_IDLE_SECS)
    ended = list(MemorySession.objects.filter(ended_at__isnull=True, last_turn_at__lt=idle_cut)
                 .exclude(_owner_wrote_since(idle_cut, same_session=True)).values_list("id", flat=True)[:1000])
    if ended:
        MemorySession.objects.filter(id__in=ended, ended_at__isnull=True).update(
            ended_at=now, abstraction_status=S.PENDING)
    # Pending (perhaps never enqueued: broker down at commit) and failed sessions are retried once
    # their last attempt is older than NYLON_ABSTRACTION_RETRY_SECS (durable clock in SessionWork).
    # Due-ness is decided in SQL, never-tried first then oldest try: a backlog of sessions not due
    # yet (failing, waiting out the retry period) must not fill the 1000 and starve the rest.
    tried_at = Subquery(SessionWork.objects.filter(session_id=OuterRef("id")).values("abstraction_tried_at")[:1])
    retry_cut = now - timedelta(seconds=settings.NYLON_ABSTRACTION_RETRY_SECS)
    # No attempt cap here: abstract_session gives up on the LLM at NYLON_ABSTRACTION_MAX_ATTEMPTS
    # and writes the heuristic facts, so every owed session ends DONE. A cap here left a session
    # FAILED for good with its turns unabstracted (and counted its successes against it).
    abstract_ids = list(ended) + list(
        MemorySession.objects.filter(abstraction_status__in=[S.PENDING, S.FAILED])
        .exclude(id__in=ended).annotate(tried_at=tried_at)
        .filter(Q(tried_at__isnull=True) | Q(tried_at__lte=retry_cut))
        .order_by(F("tried_at").asc(nulls_first=True), "id").values_list("id", flat=True)[:1000])
    _stamp(abstract_ids, "abstraction_tried_at", now)

    reflect_ids = _reflection_due(now)
    _stamp(reflect_ids, "reflection_tried_at", now)
    if reflect_ids:
        MemorySession.objects.filter(id__in=reflect_ids).update(reflection_status=S.PENDING)
    from . import hooks

    hooks.enqueue_abstractions(abstract_ids)
    hooks.enqueue_reflections(reflect_ids)
    return {"ended": ended, "abstract": abstract_ids, "reflect": reflect_ids}


def _reflection_due(now) -> list[int]:
    """Sessions to reflect now, at most 1000, least recently tried first. Sessions that cannot be
    reflected now — their org has no LLM (skipped here, for good: ``_skip_reflections``), given
    up, tried too recently — are excluded in the query: picked unordered from every owed session,
    a thousand of them would fill each tick and starve the orgs that have an LLM."""
    S = MemorySession.Status
    reflect_cut = now - timedelta(seconds=settings.NYLON_REFLECT_IDLE_SECS)
    owed = (MemorySession.objects.filter(abstraction_status=S.DONE, reflection_status__in=[S.OPEN, S.FAILED, S.PENDING])
            .exclude(_owner_wrote_since(reflect_cut)))
    # Whether an org has an LLM is settings plus its own override (config_for), decided once per
    # org that owes reflection rather than once per session.
    with_llm, without = [], []
    for org in Organization.objects.filter(id__in=owed.values("org_id")):
        (with_llm if llm.config_for(org) is not None else without).append(org.id)
    work = SessionWork.objects.filter(session_id=OuterRef("id"))
    if without:
        # Marked skipped before skipping was final (left OPEN, so matched by every tick for good):
        # closed, their SessionWork untouched. A session reopened by new facts since has its attempts
        # reset (``_write_facts``): that round is skipped as a round of its own, below.
        skipped = Exists(work.filter(reflection=SessionWork.Reflection.SKIPPED, reflection_attempts__gt=0))
        MemorySession.objects.filter(id__in=list(owed.filter(skipped, org_id__in=without)
                                                 .values_list("id", flat=True)[:SKIP_BATCH])
                                     ).update(reflection_status=S.DONE)
        _skip_reflections(list(owed.filter(org_id__in=without).exclude(skipped).order_by("id")
                               .values_list("id", flat=True)[:SKIP_BATCH]))
    if not with_llm:
        return []
    retry_cut = now - timedelta(seconds=settings.NYLON_ABSTRACTION_RETRY_SECS)
    return list(
        owed.filter(org_id__in=with_llm)
        # given up: visible as failed in /api/v1/background/status
        .exclude(Exists(work.filter(reflection_attempts__gte=settings.NYLON_ABSTRACTION_MAX_ATTEMPTS)))
        .exclude(Exists(work.filter(reflection_tried_at__gt=retry_cut)))  # not due yet
        .annotate(tried=Subquery(work.values("reflection_tried_at")[:1]))
        .order_by(F("tried").asc(nulls_first=True), "id").values_list("id", flat=True)[:1000])


SKIP_BATCH = 5000  # sessions skipped per tick: a few statements whatever the count


@transaction.atomic
def _skip_reflections(session_ids: list[int]) -> None:
    """Reflection needs an LLM: without one the session's round is over, skipped (said in
    background/status), and DONE, which is final, so the tick stops considering it. New facts
    reopen the session (``_write_facts``), and that round is skipped or reflected in its turn; the
    rounds skipped before an org configures an LLM are not reflected afterwards."""
    if not session_ids:
        return
    _stamp(session_ids, None, timezone.now())
    SessionWork.objects.filter(session_id__in=session_ids).update(
        reflection=SessionWork.Reflection.SKIPPED, reflection_detail="skipped: no LLM", bridges=0,
        reflection_attempts=F("reflection_attempts") + 1, updated_at=timezone.now())
    MemorySession.objects.filter(id__in=session_ids).update(reflection_status=MemorySession.Status.DONE)


def stamp_abstraction_sent(session_ids: list[int]) -> None:
    """These sessions' abstraction was just enqueued outside the tick (end_session, bulk ingest):
    the tick waits NYLON_ABSTRACTION_RETRY_SECS before sending them again."""
    _stamp(session_ids, "abstraction_tried_at", timezone.now())


def _stamp(session_ids: list[int], column: str | None, now) -> None:
    """Make sure these sessions have a SessionWork row, and set ``column`` (a clock) to ``now``."""
    if not session_ids:
        return
    have = set(SessionWork.objects.filter(session_id__in=session_ids).values_list("session_id", flat=True))
    missing = MemorySession.objects.filter(id__in=set(session_ids) - have).values_list("id", "org_id")
    SessionWork.objects.bulk_create([SessionWork(session_id=sid, org_id=oid) for sid, oid in missing],
                                    ignore_conflicts=True)
    if column is not None:
        SessionWork.objects.filter(session_id__in=session_ids).update(**{column: now})


def status_for(*, actor) -> dict:
    """The caller's own sessions: abstraction and reflection states, recent failures and the
    sessions whose facts came from the heuristic fallback."""
    own = Q(owner_agent=actor.agent) if actor.agent is not None else Q(owner_user=actor.user)
    qs = MemorySession.objects.filter(own, org=actor.org)
    counts: dict[str, dict[str, int]] = {"abstraction": {}, "reflection": {}}
    for a, r in qs.values_list("abstraction_status", "reflection_status"):
        counts["abstraction"][a] = counts["abstraction"].get(a, 0) + 1
        counts["reflection"][r] = counts["reflection"].get(r, 0) + 1
    failed = [{"session_key": k, "error": e, "attempts": n} for k, e, n in
              qs.filter(abstraction_status=MemorySession.Status.FAILED)
              .values_list("key", "abstraction_error", "abstraction_attempts")[:20]]
    # Done, but not (only) by the LLM: its answer was unusable or it kept failing, and heuristic
    # facts were written instead. The session's note says why; it is cleared when a later round of
    # the session is abstracted by the LLM.
    fallback = [{"session_key": k, "detail": e} for k, e in
                qs.filter(abstraction_status=MemorySession.Status.DONE).exclude(abstraction_error="")
                .order_by("-ended_at", "-id").values_list("key", "abstraction_error")[:20]]
    skipped = list(SessionWork.objects.filter(session__in=qs)
                   .exclude(reflection__in=[SessionWork.Reflection.DONE, SessionWork.Reflection.NONE])
                   .values("session__key", "reflection", "reflection_detail")[:20])
    from memory.services import followup_counts
    from nylon_project.celery import FOLLOWUP_GRACE_SECS

    return {"llm": llm.llm_state(actor.org), "sessions": counts, "failed": failed, "fallback": fallback,
            # org-wide: conflict checks still owed by committed writes (overdue: their message was lost)
            "followups": followup_counts(org_id=actor.org.id, grace_secs=FOLLOWUP_GRACE_SECS),
            "reflection": [{"session_key": s["session__key"], "status": s["reflection"],
                            "detail": s["reflection_detail"]} for s in skipped]}
