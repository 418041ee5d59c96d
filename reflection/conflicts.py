"""Conflict detection on write and conflict resolution.

Detection (a Celery task after the weave commits): candidates are the 4 nearest nodes of the same
owner and kind (pgvector ``<=>``) and the 4 nearest of the same kind that other writers share with
the new node (team memory is where agents disagree; see ``_shared_audience`` for who shares what),
and, in each of those two, up to 2 more that name the new node's entities (``_named_terms``: many
statements that embed alike leave the one about the same thing outside the 4 nearest), of
the same speaker when either speaks of itself ("I", "my"); the rules (negation flip; a different
number, date or place for the same statement) decide when no LLM is configured, and an LLM judge
decides when one is (called outside any transaction; if it fails the rule verdict stands and the
LLM state shows the failure; after a failure of the endpoint itself — timeout, connection, 5xx or
429 after retries, 401/402 — the judge is not called again within the same task). Nothing is ever deleted: superseding sets ``valid_to`` on the old
node and adds a ``supersedes`` edge.
"""

from __future__ import annotations

import hashlib
import logging
import re
from contextlib import contextmanager

from django.core.cache import cache
from django.db import IntegrityError, connection, transaction
from django.db.models import F, QuerySet, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone
from rest_framework.exceptions import ValidationError

from assets import audit
from assets.access import access_node, node_writable
from memory.engine.weave import EDGE_WEIGHTS
from memory.models import Edge, EdgeKind, Followup, Node, Visibility
from memory.nearest import RECENT_WINDOW, nearest_and_named_sql, nearest_sql, vector_literal
from memory.selectors import visible_nodes
from nylon_project import events
from nylon_project.errors import Conflict as StateConflict
from teams.models import Organization

from . import heuristics, llm
from .models import Conflict

log = logging.getLogger("nylon.reflection")

CANDIDATES = 4
# Beside the nearest, per budget: the nodes of the same window naming the new node's entities
# (``_named_terms``), most of them first. Twelve "retention period for dataset D<i>" lines embed
# alike, so the 4 nearest of D5's new value were other datasets' lines and its old value was missed.
# Two, not four: each pair costs the rules about a millisecond, and a judge call when an LLM is
# configured (bench/named_candidates_cost.py).
NAMED_CANDIDATES = 2
NAMED_TERMS = 8  # the first entities of a node that make its query (a long text names many)
LLM_MIN_COSINE = 0.7
MAX_JUDGE_CALLS = 32  # per task: a bulk import must not turn into thousands of LLM calls

JUDGE_SYSTEM = """TASK: conflict
Two memory statements are given, each with who said it: one person's, or two team members' about
the same work (a statement in the first person singular is about its speaker). Decide whether they
contradict each other
(both cannot be true at the same time, e.g. a negated preference, a different number, date or
place for the same attribute). A change over time stated explicitly is still a contradiction of
the older statement. Output JSON: {"contradicts": true|false, "reason": "one short sentence"}"""
JUDGE_SCHEMA = {"type": "object", "required": ["contradicts", "reason"],
                "properties": {"contradicts": {"type": "boolean"}, "reason": {"type": "string", "maxLength": 500}}}


# The exact window of the shared-audience search reads at most the org's this many most recent rows
# (``_recent_floor``): no index serves "other owners' org or team-X nodes", and an
# unbounded window would read the whole org for a small team's check. Older ones: the HNSW scan.
SHARED_WINDOW_ROWS = 20_000


def _shared_audience(node: Node) -> str | None:
    """Nodes of other owners that share readers with ``node``: what one reader sees beside it.

    A team node and an org node are read together by the team's members (an org node by everyone),
    two team nodes of one team by its members. A private node has one reader, its owner, and a
    restricted one an ACL of its own that can change at any time: they are paired with their
    owner's nodes only, so no one else's memory is ever set beside them. Either way a conflict is
    listed only to callers who may read both nodes (``visible_conflicts``), never revealing one to
    a reader of the other alone."""
    if node.visibility == Visibility.ORG:
        return "(m.visibility = 'org' OR (m.visibility = 'team' AND m.team_id IS NOT NULL))"
    if node.visibility == Visibility.TEAM and node.team_id is not None:
        return "(m.visibility = 'org' OR (m.visibility = 'team' AND m.team_id = %(team)s))"
    return None


def _recent_floor(cur, org_id: int) -> int:
    """The smallest id among the org's ``SHARED_WINDOW_ROWS`` most recent rows (0 when it has fewer).

    Once per check rather than inside every probe's query: reading that many index entries was
    most of a shared-audience probe's cost (9-17 ms of 14-50 ms at 20,000 rows). The ORDER BY
    follows the ``(org, -id)`` index; under ``_index_scans_only``, since a heap whose visibility map
    lags a burst of writes made the planner read every row of the org and sort them (50 ms)."""
    cur.execute("""SELECT id FROM memory_node WHERE org_id = %s ORDER BY org_id, id DESC OFFSET %s LIMIT 1""",
                [org_id, SHARED_WINDOW_ROWS - 1])
    row = cur.fetchone()
    return row[0] if row else 0


@contextmanager
def _index_scans_only(cur):
    """No sequential or bitmap scans for the statement run inside, in this transaction only.

    The approximate part of a probe (``ORDER BY embedding <=> v LIMIT k`` under the probe's filter)
    is bounded only through the HNSW index: an iterative scan stops at ``hnsw.max_scan_tuples``.
    The planner multiplies the filter's selectivities (kind, owner, visibility, team: correlated in
    any team's memory), expects a handful of matching rows, and then prefers reading every row of
    the org that passes the filter and sorting them (a bitmap scan: 18,810 rows, 60-120 ms per
    probe in an org of 26,000 nodes, growing with the org) to walking the index. pgvector's own
    advice for that misestimate is to take the other plans away; restored afterwards, since the
    caller's transaction may go on (a test's does)."""
    cur.execute("SELECT current_setting('enable_seqscan'), current_setting('enable_bitmapscan')")
    before = cur.fetchone()
    cur.execute("SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true)")
    try:
        yield
    finally:
        cur.execute("SELECT set_config('enable_seqscan', %s, true), set_config('enable_bitmapscan', %s, true)",
                    list(before))


PROBES_PER_STATEMENT = 25  # nodes whose probes share one statement (a bulk chunk's check has hundreds)


def _named_terms(node: Node) -> str | None:
    """The node's entities as a ``websearch_to_tsquery`` text (``'"D5" or "Bank of America"'``),
    or None when it names nothing: the terms that tell one of many alike statements from the
    others, where its common words ("retention", "period", "days") are shared by all of them.
    A name that is the node's speaker is left out: ``search`` holds each row's speaker too, so it
    would match every line that speaker wrote."""
    speaker = set(node.speaker.lower().split())
    names = [e.replace('"', " ").strip() for e in node.entities or ()]
    names = [e for e in names if e and not set(e.lower().split()) <= speaker][:NAMED_TERMS]
    return " or ".join(f'"{e}"' for e in names) or None


def _probes(node: Node, i: int) -> tuple[list[str], dict]:
    """The node's two nearest-neighbour probes (its owner's, its shared audience's) as SELECTs of
    ``(node id, budget, candidate id, sim, ord)``, with parameters named for the node. A node that
    names entities gets them with its named candidates (``nearest_and_named_sql``), read from the
    same window, as budgets 2 (its owner's) and 3 (its shared audience's), ``ord`` their rank."""
    owner_sql, owner_id = (("owner_agent_id", node.owner_agent_id) if node.owner_agent_id
                           else ("owner_user_id", node.owner_user_id))
    alike = f"""m.kind = %(kind{i})s AND m.id <> %(id{i})s AND m.deleted_at IS NULL AND m.valid_to IS NULL
                AND m.embedding IS NOT NULL"""
    params = {f"id{i}": node.id, f"kind{i}": node.kind, f"owner{i}": owner_id, f"team{i}": node.team_id,
              f"vec{i}": vector_literal(node.embedding)}
    terms = _named_terms(node)

    def probe(**kw) -> str:
        if terms is None:
            return nearest_sql(**kw)
        return nearest_and_named_sql(**kw, terms=f"%(terms{i})s", named_limit="%(named)s")

    if terms is not None:
        params[f"terms{i}"] = terms
    probes = [probe(where=f"m.org_id = %(org)s AND {alike} AND m.{owner_sql} = %(owner{i})s",
                    query=f"%(vec{i})s::vector", limit="%(limit)s")]
    shared = _shared_audience(node)
    if shared is not None:
        # "org_id + 0": no btree serves the org here, so the approximate part walks the HNSW index
        # (``_index_scans_only``) instead of the org's rows; the exact window reads the org's
        # recent rows from the floor up. IS DISTINCT FROM: a user-owned node has a NULL
        # owner_agent_id, and "NULL <> x" drops it.
        audience = shared.replace("%(team)s", f"%(team{i})s")
        probes.append(probe(
            where=f"(m.org_id + 0) = %(org)s AND {alike} AND m.{owner_sql} IS DISTINCT FROM %(owner{i})s AND {audience}",
            query=f"%(vec{i})s::vector", limit="%(limit)s", window_where="m.org_id = %(org)s AND m.id >= %(floor)s"))
    if terms is None:
        return [f"SELECT %(id{i})s::bigint, {budget}, p.id, p.sim, 0 FROM ({sql}) p"
                for budget, sql in enumerate(probes)], params
    return [f"SELECT %(id{i})s::bigint, {budget} + 2 * p.named::int, p.id, p.sim, p.ord FROM ({sql}) p"
            for budget, sql in enumerate(probes)], params


def _candidates_of(nodes: list[Node]) -> dict[int, list[tuple[Node, float]]]:
    """The nearest nodes of the same kind for each of ``nodes``: ``CANDIDATES`` of the node's owner
    (any visibility: the owner reads them all) and ``CANDIDATES`` of other writers sharing an
    audience with it (``_shared_audience``). Two budgets, so the owner's own near-duplicates cannot
    push another agent's contradicting statement out of the check (and the other way round). After
    each, up to ``NAMED_CANDIDATES`` of the same rows not already taken that name the node's
    entities, most of them first (``_named_terms``; none for a node naming nothing).
    Questions are no candidates (they assert nothing), and a day of "Standup N: what's everyone
    on?" lies nearest to every standup line: twice the budget is read so they do not take the
    places of statements.

    The probes of up to ``PROBES_PER_STATEMENT`` nodes go in one statement, with the org's window
    floor read once per check: a check of n nodes cost 2n round trips, each re-reading the org's
    20,000 most recent index entries. Each probe keeps its own vector as a constant: a LATERAL
    probe (the vector a column of the outer row) never gets the HNSW index, and Postgres answered
    its approximate part by reading every row of the org that passed the filter."""
    found: dict[int, list[list[tuple[int, float, int]]]] = {n.id: [[], [], [], []] for n in nodes}
    with transaction.atomic(), connection.cursor() as cur, _index_scans_only(cur):
        floor = _recent_floor(cur, nodes[0].org_id) if any(_shared_audience(n) for n in nodes) else 0
        for start in range(0, len(nodes), PROBES_PER_STATEMENT):
            selects, params = [], {"org": nodes[0].org_id, "floor": floor, "limit": 2 * CANDIDATES,
                                   "named": 2 * NAMED_CANDIDATES}
            for i, node in enumerate(nodes[start:start + PROBES_PER_STATEMENT]):
                sql, p = _probes(node, i)
                selects += sql
                params.update(p)
            cur.execute("\nUNION ALL\n".join(f"({sql})" for sql in selects), params)
            for nid, budget, cid, sim, order in cur.fetchall():
                found[nid][budget].append((cid, sim, order))
    # Only what the rules and the judge read: a vector is 384 floats to parse per candidate.
    wanted = {cid for budgets in found.values() for budget in budgets for cid, _, _ in budget}
    others = Node.objects.defer("embedding").in_bulk(wanted)
    out: dict[int, list[tuple[Node, float]]] = {}
    for nid, budgets in found.items():
        out[nid] = []
        for budget, rows in enumerate(budgets):
            # the order each probe's own query gave: nearest first (named: most of the names
            # first), ties by id
            taken = {o.id for o, _ in out[nid]}
            kept = [(others[cid], sim) for cid, sim, _ in sorted(rows, key=lambda r: (r[2], -r[1], r[0]))
                    if cid in others and cid not in taken and not heuristics.asks_only(others[cid].text)
                    and not _model_answer(others[cid])]
            out[nid] += kept[:CANDIDATES if budget < 2 else NAMED_CANDIDATES]
    return out


# Candidates of a node written without a vector (``NYLON_EMBEDDER=none``, or the embedder down):
# the recent nodes of the same kind sharing most of its words (``ts_rank`` over any of its own
# lexemes), the owner's and the shared audience's as for the nearest. Checked this way, not skipped:
# with no embedder no contradiction was ever found, and nothing said so.
_BY_WORDS = """
SELECT w.id FROM (
    SELECT m.id, m.search FROM memory_node m
    WHERE m.org_id = %(org)s AND m.kind = %(kind)s AND m.id <> %(id)s AND m.deleted_at IS NULL
      AND m.valid_to IS NULL AND {who}
    ORDER BY m.id DESC LIMIT %(window)s) w, to_tsquery('simple', %(words)s) q
WHERE w.search @@ q
ORDER BY ts_rank(w.search, q) DESC, w.id DESC LIMIT %(limit)s
"""
# Lexemes safe to join into a query as they are, letters and digits of any script (a lexeme may
# hold what tsquery syntax reads as operators), and how many of a node's (its most repeated first):
# a 20,000-character node's 2,400 lexemes took 0.7 s a probe.
_PLAIN_LEXEME = re.compile(r"[^\W_]+")
MAX_WORDS = 64


def _word_candidates_of(nodes: list[Node]) -> dict[int, list[tuple[Node, float]]]:
    """``_candidates_of`` for nodes without a vector: by shared words, with no cosine (0.0: the judge
    is asked only about pairs a rule flags)."""
    found: dict[int, list[int]] = {}
    with connection.cursor() as cur:
        cur.execute("""SELECT n.id, ARRAY(SELECT u.lexeme FROM unnest(n.search) u
                                          ORDER BY coalesce(array_length(u.positions, 1), 1) DESC, u.lexeme)
                       FROM memory_node n WHERE n.id = ANY(%s)""", [[n.id for n in nodes]])
        lexemes = {nid: [w for w in (words or []) if _PLAIN_LEXEME.fullmatch(w)][:MAX_WORDS]
                   for nid, words in cur.fetchall()}
        # Other writers' rows from the org's recent floor up, as the nearest's shared probe reads
        # them: without it the probe walked back through every row another owner keeps private.
        floor = _recent_floor(cur, nodes[0].org_id) if any(_shared_audience(n) for n in nodes) else 0
        for node in nodes:
            words = lexemes.get(node.id)
            found[node.id] = []
            if not words:
                continue
            owner_sql, owner_id = (("owner_agent_id", node.owner_agent_id) if node.owner_agent_id
                                   else ("owner_user_id", node.owner_user_id))
            params = {"org": node.org_id, "kind": node.kind, "id": node.id, "owner": owner_id, "team": node.team_id,
                      "window": RECENT_WINDOW, "limit": 2 * CANDIDATES, "words": " | ".join(words), "floor": floor}
            audience = _shared_audience(node)
            for who in (f"m.{owner_sql} = %(owner)s",
                        *([f"m.{owner_sql} IS DISTINCT FROM %(owner)s AND {audience} AND m.id >= %(floor)s"]
                          if audience else [])):
                cur.execute(_BY_WORDS.format(who=who), params)
                found[node.id] += [r[0] for r in cur.fetchall()]
    others = Node.objects.defer("embedding").in_bulk({i for ids in found.values() for i in ids})
    out: dict[int, list[tuple[Node, float]]] = {}
    for nid, ids in found.items():
        kept = [others[i] for i in ids if i in others and not heuristics.asks_only(others[i].text)
                and not _model_answer(others[i])]
        out[nid] = [(o, 0.0) for o in kept]
    return out


def _model_answer(node: Node) -> bool:
    """A model's reply the proxy wrote back: it restates memories (or the model's guesses), and the
    queue is for what people and agents stated. Two replies ("… length=0" / "… length=966") or a
    reply and the correction of what it restated were queued as conflicts of their own."""
    from assets.context import MODEL_ANSWER, derived_kind

    return derived_kind(node.source_kind, node.metadata) == MODEL_ANSWER


def _same_subject(a: Node, b: Node) -> bool:
    """Different speakers' "I" are different people: Ana's "I eat spicy food" and Ben's "I don't"
    do not contradict. A statement about the work ("the staging cluster runs Redis 6.2", "we deploy
    on Fridays") has one subject whoever reports it — two agents of a team have two speakers — so the
    speaker tells subjects apart only where a statement speaks of its speaker.

    Likewise two teams' "we": the platform team's "We run Node 18" and the web team's "We upgraded to
    Node 20" are two groups' tools, when both speak of their group and each was written to its own
    team's memory (an org-wide note has no team to tell its "we" by)."""
    if (a.team_id and b.team_id and a.team_id != b.team_id
            and heuristics.first_person_plural(a.text) and heuristics.first_person_plural(b.text)):
        return False
    if not a.speaker or not b.speaker or a.speaker.strip().lower() == b.speaker.strip().lower():
        return True
    return not (heuristics.first_person_singular(a.text) or heuristics.first_person_singular(b.text))


def _judge(org: Organization, a: Node, b: Node) -> tuple[bool, str]:
    out = llm.complete_json(org=org, system=JUDGE_SYSTEM, schema=JUDGE_SCHEMA, max_tokens=200,
                            user=f"Statement A ({a.speaker or 'someone'}, {a.occurred_at.date()}): {a.text}\n"
                                 f"Statement B ({b.speaker or 'someone'}, {b.occurred_at.date()}): {b.text}")
    return bool(out["contradicts"]), " ".join(out["reason"].split())[:480] or "the LLM judge found a contradiction"


NO_VERDICT_TTL = 30 * 86400


def _verdict_key(cfg: llm.LlmConfig, a: Node, b: Node) -> str:
    """The judge's "no" for exactly this pair as judged: the nodes (created_at keeps a rebuilt
    database's reused ids apart), their texts, and the model and prompt that judged them."""
    digest = hashlib.sha256("\x1f".join([
        cfg.model, JUDGE_SYSTEM, a.created_at.isoformat(), b.created_at.isoformat(), a.speaker, b.speaker,
        a.text, b.text]).encode()).hexdigest()[:32]
    return f"llm-judge-no:{connection.settings_dict.get('NAME')}:{cfg.scope}:{a.id}:{b.id}:{digest}"


def _judged_no(cfg: llm.LlmConfig, a: Node, b: Node) -> bool:
    try:
        return bool(cache.get(_verdict_key(cfg, a, b)))
    except Exception:  # Redis down: judge again rather than fail the check
        return False


def _remember_no(cfg: llm.LlmConfig, a: Node, b: Node) -> None:
    try:
        cache.set(_verdict_key(cfg, a, b), 1, NO_VERDICT_TTL)
    except Exception as exc:
        log.warning("judge verdict not remembered: %s", exc)


def _days_apart(a: Node, b: Node) -> bool:
    """Whether the two happened on different days (UTC; their write time when no time was given)."""
    when_a, when_b = a.occurred_at or a.created_at, b.occurred_at or b.created_at
    return when_a is not None and when_b is not None and when_a.date() != when_b.date()


def detect(*, org_id: int, node_ids: list[int]) -> int:
    """Find and store conflicts for these nodes; returns how many new conflicts were stored."""
    org = Organization.objects.filter(pk=org_id).first()
    if org is None:
        return 0
    cfg = llm.config_for(org)
    nodes = list(Node.objects.filter(org_id=org_id, id__in=node_ids, deleted_at__isnull=True))
    created = 0
    judged = 0
    judge_down: llm.LlmError | None = None
    # Each pair is decided once per task: node X finds Y among its nearest and Y finds X, and a
    # "no" from the judge stores nothing, so the Conflict row could not stop the second paid call.
    seen: set[tuple[int, int]] = set()
    # A question asserts nothing, so contradicts nothing (nor is worth a judge call).
    nodes = [n for n in nodes if not heuristics.asks_only(n.text) and not _model_answer(n)]
    with_vector = [n for n in nodes if n.embedding is not None]
    candidates = _candidates_of(with_vector) if with_vector else {}
    without = [n for n in nodes if n.embedding is None]
    if without:
        candidates |= _word_candidates_of(without)
    pairs: list[tuple[Node, Node, float]] = []
    for node in nodes:
        for other, sim in candidates[node.id]:
            if _same_subject(node, other):
                a, b = sorted((node, other), key=lambda n: n.id)
                pairs.append((a, b, sim))
    # The pairs already stored (a re-sent or redelivered check), in one query rather than one per pair.
    stored = _stored_pairs({(a.id, b.id) for a, b, _ in pairs})
    restated = _restating_pairs(org_id, pairs)
    for a, b, sim in pairs:
        if (a.id, b.id) in seen or (a.id, b.id) in stored or (a.id, b.id) in restated:
            continue
        seen.add((a.id, b.id))
        if _days_apart(a, b) and heuristics.only_counts_differ(a.text, b.text):
            continue  # a status line's counts of two days: that day's report, not a contradiction
        reason = heuristics.conflict_reason(a.text, b.text, a.entities, b.entities)
        detector = Conflict.Detector.RULE
        if (cfg is not None and judge_down is None and (reason or sim >= LLM_MIN_COSINE)
                and judged < MAX_JUDGE_CALLS):
            if _judged_no(cfg, a, b):  # a later task (a redelivery, a re-sent follow-up)
                continue
            if Conflict.objects.filter(node_a=a, node_b=b).exists():
                continue  # stored by a concurrent delivery since ``stored`` was read: no paid call
            judged += 1
            try:
                yes, why = _judge(org, a, b)
                reason, detector = (why if yes else None), Conflict.Detector.LLM
                if not yes:
                    _remember_no(cfg, a, b)
            except llm.LlmError as exc:  # the rule verdict stands; the LLM state shows the outage
                log.warning("conflict judge unavailable, rules used: %s", exc)
                if exc.lasting:
                    # A hung or refusing endpoint would cost every further pair its own full
                    # retries (minutes of a worker while other work waits): the rest of this
                    # task's pairs keep their rule verdicts, and its LLM time stays one call's.
                    judge_down = exc
        if reason:
            created += _store(org, a, b, reason, detector)
    if judge_down is not None:
        log.warning("conflict judge not called for the rest of this check (%s): rule verdicts used", judge_down.kind)
    return created


def _restating_pairs(org_id: int, pairs: list[tuple[Node, Node, float]]) -> set[tuple[int, int]]:
    """Pairs of which a side is derived (a fact, a summary) and whose contradiction is already in the
    queue at its sources: "the data migration moved to January 9th" abstracted from a turn that
    conflicts with the turn that dated it to December 14th is that one conflict again. Stored too, it
    was a second queue entry (with a garbled reason, the fact's own date suffix read as another
    date) that stayed open after the turns' conflict was resolved. A derived side that shares a
    source with the other is skipped as well: it restates what it is compared with."""
    def family(n: Node) -> set[int]:
        return {n.id, *(n.source_node_ids or ())}

    derived = [(a, b) for a, b, _ in pairs if a.source_node_ids or b.source_node_ids]
    if not derived:
        return set()
    ids = set().union(*(family(a) | family(b) for a, b in derived))
    conflicting = set(Conflict.objects.filter(org_id=org_id, node_a_id__in=ids, node_b_id__in=ids)
                      .values_list("node_a_id", "node_b_id"))
    out = set()
    for a, b in derived:
        fa, fb = family(a), family(b)
        if fa & fb or any((x, y) in conflicting or (y, x) in conflicting for x in fa for y in fb):
            out.add((a.id, b.id))
    return out


def _stored_pairs(pairs: set[tuple[int, int]]) -> set[tuple[int, int]]:
    if not pairs:
        return set()
    rows = Conflict.objects.filter(node_a_id__in={a for a, _ in pairs}, node_b_id__in={b for _, b in pairs})
    return set(rows.values_list("node_a_id", "node_b_id")) & pairs


def detect_followup(*, followup_id: int) -> int:
    """The conflict check a write recorded as owed (``memory.Followup``); the row is deleted once the
    check has run, so a later delivery (a re-send by the sweep, a redelivery) finds it gone and does
    nothing. Two deliveries at once both check, and the pair's unique constraint keeps one conflict."""
    row = Followup.objects.filter(pk=followup_id).values_list("org_id", "node_ids").first()
    if row is None:
        return 0
    created = detect(org_id=row[0], node_ids=row[1])
    Followup.objects.filter(pk=followup_id).delete()
    return created


def _store(org: Organization, a: Node, b: Node, reason: str, detector: str) -> int:
    try:
        with transaction.atomic():
            c = Conflict.objects.create(org=org, node_a=a, node_b=b, reason=reason[:500], detector=detector)
            Edge.objects.bulk_create([Edge(org=org, src=a, dst=b, kind=EdgeKind.CONTRADICTS,
                                           weight=EDGE_WEIGHTS["contradicts"])], ignore_conflicts=True)
            events.publish(org.id, "conflict.detected", {"conflict_id": c.id, "node_ids": [a.id, b.id],
                                                         "detector": detector})
    except IntegrityError:
        return 0  # a concurrent delivery stored it
    return 1


# --------------------------------------------------------------------------------------------
# reads and resolution


def visible_conflicts(*, actor) -> QuerySet[Conflict]:
    """Conflicts of the caller's org whose two nodes the caller may both read."""
    visible = visible_nodes(actor=actor).values("id")
    return (Conflict.objects.filter(org=actor.org, node_a__in=visible, node_b__in=visible)
            .select_related("node_a", "node_b", "node_a__source_agent", "node_a__source_user",
                            "node_b__source_agent", "node_b__source_user"))


ACTIONS = {"keep_both": Conflict.Status.KEPT_BOTH, "supersede": Conflict.Status.SUPERSEDED,
           "reject": Conflict.Status.REJECTED}


def resolve(*, actor, conflict: Conflict, action: str, keep_id: int | None = None,
            request_id: str = "") -> Conflict:
    if keep_id is not None and keep_id not in (conflict.node_a_id, conflict.node_b_id):
        raise ValidationError({"keep": ["Must be one of the two nodes of the conflict."]})
    if action == "supersede":
        if keep_id is None:
            raise ValidationError({"keep": ["Supersede needs the node to keep."]})
        old_id = conflict.node_b_id if keep_id == conflict.node_a_id else conflict.node_a_id
        # Superseding closes the old node's validity: a write, so the node write rule decides (the
        # one used by the node API: an org admin with a read-only ACL grant is refused, 403
        # ``acl_read_only``). Checked before the transaction, so the audited refusal is not rolled
        # back with it; a conflict's two nodes never change, so the check holds for the write.
        access_node(actor, old_id, for_write=True, request_id=request_id)
    else:
        # Keeping both or rejecting closes the conflict for every reader of the two memories, and a
        # closed conflict cannot be reopened: a decision about the memories, so it needs the right
        # to change one of them (the owner, an admin of its scope, an ACL writer), not just to read
        # both. The node write rule decides and audits it, as for superseding; when the caller may
        # change neither, the refusal names the first node.
        writable = next((n.id for n in (conflict.node_a, conflict.node_b) if node_writable(actor, n)),
                        conflict.node_a_id)
        access_node(actor, writable, for_write=True, request_id=request_id)
    return _resolve(actor=actor, conflict=conflict, action=action, keep_id=keep_id, request_id=request_id)


def _unsupported_derivations(org_id: int, superseded_id: int) -> list[int]:
    """The current facts (and bridges, and what is drawn from those) whose every source is no
    longer current once ``superseded_id`` is: "Ana eats spicy food", abstracted from the leaf just
    superseded, would otherwise keep serving the replaced statement. A derivation that another
    current source still supports stays."""
    out: list[int] = []
    frontier = [superseded_id]
    while frontier:
        # (the partial index's own condition repeated, so the planner may use node_derived_sources: a
        # resolution read every node of the org: 42 ms a step at 100k nodes, 0.44 ms with it)
        derived = list(Node.objects.filter(org_id=org_id, source_node_ids__overlap=frontier, valid_to__isnull=True,
                                           deleted_at__isnull=True, source_node_ids__len__gt=0)
                       .exclude(pk__in=out).values_list("id", "source_node_ids"))
        gone = set(out) | set(frontier)
        sources = {sid for _, ids in derived for sid in ids if sid not in gone}
        still = set(Node.objects.filter(org_id=org_id, pk__in=sources, valid_to__isnull=True,
                                        deleted_at__isnull=True).values_list("id", flat=True))
        frontier = [nid for nid, ids in derived if not (set(ids) & still)]
        out.extend(frontier)
    return out


def _validity_end(old: Node, keep: Node, now):
    """When the superseded memory stopped being true: when the kept one was said (the migration's
    night, not the day someone resolved the conflict: governance showed "valid 10 Nov → 2 Dec" for a
    version replaced on 24 Nov), or, when the kept memory is the older one, when the superseded one
    began (it never held). Never after now: a kept memory dated ahead is not yet said."""
    began = old.valid_from or old.occurred_at
    said = keep.occurred_at or now
    return min(now, max(began, said)) if began is not None else min(now, said)


class AlreadyResolved(StateConflict):
    """409: the conflict was resolved (by someone else, or an earlier click): a state, not bad input."""

    default_code = "conflict_already_resolved"

    def __init__(self, conflict: Conflict):
        super().__init__(f"Conflict {conflict.pk} is already resolved ({conflict.status}); nothing was changed.")


@transaction.atomic
def _resolve(*, actor, conflict: Conflict, action: str, keep_id: int | None, request_id: str) -> Conflict:
    c = Conflict.objects.select_for_update().select_related("node_a", "node_b").get(pk=conflict.pk)
    if c.status != Conflict.Status.OPEN:
        raise AlreadyResolved(c)
    now = timezone.now()
    detail = {"action": action, "keep": keep_id, "nodes": [c.node_a_id, c.node_b_id]}
    if action == "supersede":
        keep, old = (c.node_a, c.node_b) if keep_id == c.node_a_id else (c.node_b, c.node_a)
        # The conflict's row was read FOR UPDATE joined with its two memories, which locks their rows
        # too (in id order) and reads them as a racing writer left them: a delete of either waits for
        # this, or this for it (``memory.services._reinstate_superseded`` locks what it would hand a
        # place back to). So a delete cannot reinstate the old memory while this retires it unseen,
        # and a memory deleted meanwhile is not kept.
        if keep.deleted_at is not None:
            raise ValidationError({"keep": [f"Memory {keep.pk} was deleted: keep the other, or keep both."]})
        if keep.valid_to is not None:
            # Resolving another conflict replaced it: keeping it would supersede the current one
            # with a memory retrieval no longer serves, leaving neither.
            raise ValidationError({"keep": [f"Memory {keep.pk} is itself superseded (another conflict's "
                                            "resolution replaced it): keep the other, or keep both."]})
        ended = _validity_end(old, keep, now)
        Node.objects.filter(pk=old.pk, valid_to__isnull=True).update(valid_to=ended)
        unsupported = [n for n in _unsupported_derivations(c.org_id, old.pk) if n != keep.pk]
        # (a derivation begun after that moment ends where it began: never before it)
        Node.objects.filter(pk__in=unsupported).update(
            valid_to=Greatest(Value(ended), Coalesce(F("valid_from"), F("occurred_at"))))
        Edge.objects.bulk_create([Edge(org=c.org, src=keep, dst_id=gone, kind=EdgeKind.SUPERSEDES,
                                       weight=EDGE_WEIGHTS["supersedes"]) for gone in [old.pk, *unsupported]],
                                 ignore_conflicts=True)
        if unsupported:
            detail["also_superseded"] = unsupported
    c.status = ACTIONS[action]
    c.kept_node_id = keep_id
    c.resolved_by = actor.label[:255]
    c.resolved_at = now
    c.save(update_fields=["status", "kept_node", "resolved_by", "resolved_at"])
    audit.record(actor=actor, action="conflict.resolve", object_type="conflict", object_id=c.id,
                 detail=detail, request_id=request_id)
    events.publish(c.org_id, "conflict.resolved", {"conflict_id": c.id, "status": c.status})
    return c
