"""Export and import of an org's memory (nodes, edges, assets, asset versions) as JSONL.

One JSON object per line, ``{"type": "header" | "node" | "edge" | "asset" | "asset_version", ...}``.
Rows refer to each other by their ids in the source org and to people by portable names (username,
agent name, team slug), so a file imports into any org: ids are remapped, owners are matched by
name among the target org's members and agents (a version's author too: ``_author``), and a row
whose owner (or team, for team rows) does not exist there is skipped and counted, never given to
someone else.

Through the API an org admin exports exactly what it may read (``visible_nodes`` and
``readable_assets``): other people's private rows, restricted rows without a grant and team rows
of teams it is not in stay out. Its import may neither write nor use what it may not read: such
rows are refused (``_unreadable_row``), and rows are matched only to nodes and assets it may read
(``_importer_reads_nodes``), so a file cannot attach edges to, or learn of, a member's private
memory. The management commands run as the operator (no tenant actor) and export and import
everything.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, connection, models, transaction
from django.db.models import BooleanField, ExpressionWrapper, Q
from django.db.models.functions import MD5
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from memory.models import EMBEDDING_DIM, Edge, Node, Visibility
from teams.models import Agent, Membership, Organization, Team

from . import audit
from .models import Asset, AssetVersion

FORMAT = "nylon-export"
FORMAT_VERSION = 1
_REF_FIELDS = {"id", "org", "owner_user", "owner_agent", "team", "source_user", "source_agent", "embedding",
               "approved_by", "asset", "src", "dst", "search", "txid",
               "author_agent", "author_user"}  # a version's author: by name (_author_names), not id


def _plain(v):
    if isinstance(v, dt.datetime | dt.date):
        return v.isoformat()
    return v


def _fields(obj) -> dict:
    return {f.attname: _plain(getattr(obj, f.attname)) for f in obj._meta.concrete_fields
            if f.name not in _REF_FIELDS}


def _who(obj) -> dict:
    return {"owner_user": obj.owner_user.username if obj.owner_user_id else None,
            "owner_agent": obj.owner_agent.name if obj.owner_agent_id else None,
            "team": obj.team.slug if obj.team_id else None}


def _author_names(v: AssetVersion) -> dict:
    """A version's author by the name it bears now, as owners are exported (``_who``). The label is
    the name at the time: an agent renamed since, whose former name a new agent took, would be
    matched on import to the newcomer, who could then write on the renamed agent's pending edit."""
    return {"author_agent": v.author_agent.name if v.author_agent_id else None,
            "author_user": v.author_user.username if v.author_user_id else None}


def _author(row: dict, users: dict, agents: dict) -> dict:
    """A version's author in the target org, matched as owners are: the org's agent of that name,
    else the member with that username, else none. An agent may write again on its own edit
    awaiting review, told by ``author_agent`` (``services._writes_on_what_it_reads``), so an
    import must give the edit to the agent that wrote it, and to no other.

    The names (``_author_names``) are popped from ``row``. Only a file from before them falls back
    to the label ("agent:<name>", "user:<username>"), the name at the time, which a namesake may
    bear now. A row with the names but both null had no author left in the source (deleted): no
    one, not the label's namesake. Names resolve among the importing org's agents and members only,
    never ids: an org admin already acts as any of its agents (it mints their keys)."""
    if "author_agent" in row or "author_user" in row:
        agent, user = row.pop("author_agent", None), row.pop("author_user", None)
        if agent:  # an agent wins over a user, as for owners (a version has one author)
            return {"author_agent": agents.get(agent), "author_user": None}
        return {"author_agent": None, "author_user": users.get(user or "")}
    kind, _, name = (row.get("author_label") or "").partition(":")
    return {"author_agent": agents.get(name) if kind == "agent" else None,
            "author_user": users.get(name) if kind == "user" else None}


def export_lines(org: Organization, *, actor=None) -> Iterator[str]:
    nodes = Node.objects.filter(org=org).select_related("owner_user", "owner_agent", "team").order_by("id")
    assets = Asset.objects.filter(org=org).select_related("owner_user", "owner_agent", "team").order_by("id")
    if actor is not None:  # exactly what the actor may read, by the one access rule
        from memory.selectors import visible_nodes

        from .access import readable_assets

        nodes = nodes.filter(id__in=visible_nodes(actor=actor).values("id"))
        assets = assets.filter(id__in=readable_assets(actor).values("id"))
    yield json.dumps({"type": "header", "format": FORMAT, "version": FORMAT_VERSION, "org": org.slug,
                      "exported_at": timezone.now().isoformat()})
    node_ids = set()
    for n in nodes.iterator(chunk_size=500):
        node_ids.add(n.id)
        row = {"type": "node", "id": n.id, **_who(n), **_fields(n),
               "source_user": n.source_user.username if n.source_user_id else None,
               "source_agent": n.source_agent.name if n.source_agent_id else None,
               "embedding": [float(x) for x in n.embedding] if n.embedding is not None else None}
        yield json.dumps(row, ensure_ascii=False)
    for e in Edge.objects.filter(org=org).order_by("id").iterator(chunk_size=2000):
        if e.src_id in node_ids and e.dst_id in node_ids:
            yield json.dumps({"type": "edge", "src": e.src_id, "dst": e.dst_id, "kind": e.kind,
                              "weight": e.weight})
    for a in assets:
        yield json.dumps({"type": "asset", "id": a.id, **_who(a), **_fields(a),
                          "approved_by": a.approved_by.username if a.approved_by_id else None},
                         ensure_ascii=False)
        versions = AssetVersion.objects.filter(asset=a).select_related("author_agent", "author_user")
        for v in versions.order_by("version"):
            yield json.dumps({"type": "asset_version", "asset": a.id, **_author_names(v), **_fields(v)},
                             ensure_ascii=False)


# The columns an exported row carries besides its model's own (``_fields``): references by id in
# the source org or by portable name. Nothing else is imported: a row cannot name an ``org_id``,
# an ``owner_user_id`` or any column the export does not write.
_ROW_REFS = {
    "node": {"id", "owner_user", "owner_agent", "team", "source_user", "source_agent", "embedding"},
    "asset": {"id", "owner_user", "owner_agent", "team", "approved_by"},
    "asset_version": {"asset", "author_agent", "author_user"},
    "edge": {"src", "dst", "kind", "weight"},
}


def _allowed(kind: str) -> set[str]:
    model = {"node": Node, "asset": Asset, "asset_version": AssetVersion}.get(kind)
    allowed = set(_ROW_REFS[kind])
    if model is not None:
        allowed |= {f.attname for f in model._meta.concrete_fields if f.name not in _REF_FIELDS and not f.is_relation}
    return allowed


def _check_columns(kind, row: dict) -> None:
    if kind not in _ROW_REFS:
        return  # an unknown type is refused by import_lines itself
    unknown = sorted(set(row) - _allowed(kind))
    if unknown:
        raise ValueError(f"Unknown {kind} columns: {', '.join(unknown[:5])}.")


def _choices() -> dict[str, dict[str, list[str]]]:
    """Per row type, the columns that hold one of a fixed set of values, and the values. The
    database has no CHECK constraints for them, and the engine cache maps node ``kind``,
    ``visibility`` and edge ``kind`` through fixed tables (``memory.cache``): one unknown value
    there is a KeyError on every build of the org's index, so every resonate of the org fails."""
    out: dict[str, dict[str, list[str]]] = {}
    for kind, model in (("node", Node), ("edge", Edge), ("asset", Asset), ("asset_version", AssetVersion)):
        out[kind] = {f.attname: [str(v) for v, _ in f.choices] for f in model._meta.concrete_fields
                     if f.choices and not f.is_relation}
    out["asset"]["visibility"] = list(Visibility.values)  # a plain column holding Visibility values
    return out


_REQUIRED = {"edge": ("kind",)}  # without it the row means nothing (the others: ``_bad_types``)


def _bad_values(kind: str, row: dict, choices: dict[str, dict[str, list[str]]]) -> dict[str, list[str]]:
    bad: dict[str, list[str]] = {}
    for name in _REQUIRED.get(kind, ()):
        if name not in row:
            bad[name] = ["This field is required."]
    for name, allowed in choices.get(kind, {}).items():
        if name in row and row[name] not in allowed:
            bad[name] = [f"{json.dumps(row[name])[:40]} is not a valid {kind} {name} ({', '.join(allowed)})."]
    return bad


class ImportInvalid(ValueError):
    """Values a row may not hold, found before anything was written. ``errors`` is keyed by line
    number (1-based, as an editor shows the file) and column; the message names the first."""

    def __init__(self, errors: dict[str, dict[str, list[str]]]):
        self.errors = errors
        line, fields = next(iter(errors.items()))
        name, messages = next(iter(fields.items()))
        more = sum(len(f) for f in errors.values()) - 1
        super().__init__(f"line {line}: {name}: {messages[0]}" + (f" (and {more} more)" if more else ""))


_MAX_ERRORS = 50  # enough to fix a file by; the rest is not looked at


def _parse(raw: str, header_seen: bool) -> tuple[str | None, dict, dict[str, list[str]]]:
    """(row type, row, errors) of one line: JSON objects, a supported header first, known row
    types and columns. A bad line is an error on its line, never the parser's own message."""
    try:
        row = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, {}, {"json": [f"Not valid JSON ({exc.msg} at column {exc.colno})."]}
    if not isinstance(row, dict):
        return None, {}, {"json": ["Every line must be a JSON object."]}
    kind = row.pop("type", None)
    if not header_seen:
        if kind != "header" or row.get("format") != FORMAT or row.get("version") != FORMAT_VERSION:
            return kind, row, {"type": ["Not a Nylon export (format header missing or unsupported)."]}
    elif kind not in _ROW_REFS:
        return kind, row, {"type": [f"Unknown row type: {json.dumps(kind)[:40]}."]}
    else:
        try:
            _check_columns(kind, row)
        except ValueError as exc:
            return kind, row, {sorted(set(row) - _allowed(kind))[0]: [str(exc)]}
    return kind, row, {}


def _parsed(lines: Iterable[str]) -> Iterator[tuple[int, str | None, dict, dict[str, list[str]]]]:
    """(line number, row type, row, errors) of every non-blank line, the header first. A file whose
    first line is no header ends there: what follows it is not a Nylon export to check."""
    header = False
    for lineno, raw in enumerate(lines, start=1):
        raw = raw.strip()
        if not raw:
            continue
        kind, row, errors = _parse(raw, header)
        yield lineno, kind, row, errors
        if not header:
            if errors:
                return
            header = True
    if not header:
        raise ValueError("Empty file.")


def _rows(lines: Iterable[str]) -> Iterator[tuple[int, str, dict]]:
    """(line number, row type, row) of every non-blank line of a file ``_validate`` passed."""
    for lineno, kind, row, errors in _parsed(lines):
        if errors:
            raise ImportInvalid({str(lineno): errors})
        yield lineno, kind, row


def _model_fields(kind: str) -> dict:
    model = {"node": Node, "asset": Asset, "asset_version": AssetVersion, "edge": Edge}[kind]
    return {f.attname: f for f in model._meta.concrete_fields if f.name not in _REF_FIELDS and not f.is_relation}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _value_error(field, value) -> str | None:
    """Why ``value`` cannot go into ``field`` (None if it can), decided here: the database would
    refuse it in the middle of the import with a message naming its own tables and casts."""
    if value is None:
        return None if field.null else "This field may not be null."
    if isinstance(field, ArrayField):
        if not isinstance(value, list):
            return "Expected a list."
        for item in value:
            why = _value_error(field.base_field, item)
            if why:
                return f"Item {json.dumps(item)[:40]}: {why}"
        return None
    if isinstance(field, models.JSONField):
        default = field.get_default()
        if isinstance(default, dict) and not isinstance(value, dict):
            return "Expected a JSON object."
        if isinstance(default, list) and not isinstance(value, list):
            return "Expected a list."
        return None
    if isinstance(field, models.BooleanField):
        ok, why = isinstance(value, bool), "Expected true or false."
    elif isinstance(field, models.IntegerField):
        ok, why = _is_int(value), "Expected a whole number."
    elif isinstance(field, models.FloatField):
        ok, why = _is_number(value), "Expected a number."
    elif isinstance(field, models.DateTimeField):
        try:
            ok = isinstance(value, str) and parse_datetime(value) is not None
        except ValueError:
            ok = False
        why = "Expected an ISO 8601 date and time."
    elif isinstance(field, models.CharField | models.TextField):
        ok, why = isinstance(value, str), "Expected a string."
        if ok and "\x00" in value:
            ok, why = False, "A string may not contain NUL characters."
    else:
        ok, why = True, ""
    if not ok:
        return why
    try:
        field.run_validators(value)  # max_length, the integer range of the column
    except DjangoValidationError as exc:
        return " ".join(exc.messages)
    return None


def _name_or_null(v) -> str | None:
    return None if v is None or isinstance(v, str) else "Expected a name (a string) or null."


def _embedding_error(v) -> str | None:
    if v is None:
        return None
    if not isinstance(v, list) or not all(_is_number(x) for x in v):
        return "Expected a list of numbers or null."
    if len(v) != EMBEDDING_DIM:
        return f"Expected {EMBEDDING_DIM} numbers, got {len(v)}."
    return None


def _id_error(v) -> str | None:
    return None if _is_int(v) else "Expected the row's id in the exported org (a whole number)."


# The reference columns of each row type (``_ROW_REFS``) and how each must look; True: required.
_REF_CHECKS: dict[str, dict[str, tuple[Callable, bool]]] = {
    "node": {"id": (_id_error, True), "owner_user": (_name_or_null, False), "owner_agent": (_name_or_null, False),
             "team": (_name_or_null, False), "source_user": (_name_or_null, False),
             "source_agent": (_name_or_null, False), "embedding": (_embedding_error, False)},
    "asset": {"id": (_id_error, True), "owner_user": (_name_or_null, False), "owner_agent": (_name_or_null, False),
              "team": (_name_or_null, False), "approved_by": (_name_or_null, False)},
    "asset_version": {"asset": (_id_error, True), "author_agent": (_name_or_null, False),
                      "author_user": (_name_or_null, False)},
    "edge": {"src": (_id_error, True), "dst": (_id_error, True)},
}


def _required(field) -> bool:
    return not (field.null or field.has_default() or field.primary_key or getattr(field, "auto_now", False)
                or getattr(field, "auto_now_add", False))


def _bad_types(kind: str, row: dict, bad: dict[str, list[str]]) -> dict[str, list[str]]:
    """Errors of the columns ``_bad_values`` did not already refuse: missing, null or ill-typed."""
    out: dict[str, list[str]] = {}
    for name, (check, required) in _REF_CHECKS.get(kind, {}).items():
        if name not in row:
            if required:
                out[name] = ["This field is required."]
        elif (why := check(row[name])) is not None:
            out[name] = [why]
    for name, field in _model_fields(kind).items():
        if name in bad or name in out:
            continue
        if name not in row:
            if _required(field):
                out[name] = ["This field is required."]
        elif (why := _value_error(field, row[name])) is not None:
            out[name] = [why]
    return out


_OWNER_ONLY = {"private", "restricted"}


@dataclass(frozen=True)
class _Importer:
    """Who imports through the API (an org admin), by the names a file uses: what its rows may be."""

    actor: object  # teams.auth.Actor
    username: str
    team_slugs: frozenset[str]  # the org's teams the importer is in
    org_team_slugs: frozenset[str]  # every team of the org (a row naming another is skipped, not refused)
    agent_teams: dict[str, str | None]  # agent name -> the slug of its team

    @classmethod
    def of(cls, org: Organization, actor) -> _Importer:
        teams = dict(Team.objects.filter(org=org).values_list("id", "slug"))
        return cls(actor=actor, username=actor.user.get_username(),
                   team_slugs=frozenset(teams[i] for i in actor.team_ids if i in teams),
                   org_team_slugs=frozenset(teams.values()),
                   agent_teams=dict(Agent.objects.filter(org=org).values_list("name", "team__slug")))

    def owns(self, row: dict) -> bool:
        return not row.get("owner_agent") and row.get("owner_user") == self.username

    def foreign_user_row(self, row: dict) -> bool:
        """A row owned by another member: its event id is that member's, not the importer's."""
        return not row.get("owner_agent") and not self.owns(row)


def _unreadable_row(kind: str, row: dict, importer: _Importer) -> dict[str, list[str]]:
    """An import through the API may not write what the importer could not read
    (docs/permissions.md), or it would plant memories, attributed to their owner, where the
    importer has no access:

    * private or restricted rows owned by another member (nobody but the owner reads private; a
      new restricted row has no grant);
    * team rows of another member for a team the importer is not in (an org admin reads team
      memory only as a member of the team, ``assets.access._visible``).

    Agents' rows are allowed, as the agent could write them: an org admin already acts as any agent
    of the org (it mints their keys). But a team row of an agent names the agent's own team or one
    the importer is in, as an agent writes only to its own team (``memory.services._check_scope``).
    A team row naming a team the org lacks is skipped later (``unowned``), not refused here. The
    operator's ``manage.py import_memory``, a full restore, has no importer."""
    if kind not in ("node", "asset"):
        return {}
    what = "memory" if kind == "node" else "asset"  # the message names the line's kind of row
    visibility, team = row.get("visibility"), row.get("team")
    if visibility in _OWNER_ONLY and importer.foreign_user_row(row):
        return {"owner_user": [f"{visibility} {what} of a member is imported through the API only by "
                               f"that member ({importer.username} is not {row.get('owner_user')}); a full "
                               "restore is `manage.py import_memory`."]}
    if visibility != "team" or importer.owns(row) or (team and team not in importer.org_team_slugs):
        return {}
    if row.get("owner_agent"):
        agent = row["owner_agent"]
        if agent not in importer.agent_teams or not team or team == importer.agent_teams[agent] \
                or team in importer.team_slugs:
            return {}
        return {"team": [f"team {what} of agent {agent} is imported through the API only into the agent's "
                         f"own team or a team of the importer ({importer.username} is not in {team})."]}
    if team and team in importer.team_slugs:
        return {}
    return {"team": [f"team {what} of a member is imported through the API only into a team the importer is "
                     f"in ({importer.username} is not in {team or 'a team'}); a full restore is "
                     "`manage.py import_memory`."]}


def _foreign_event_id(event_id: str) -> str:
    """The event id a row of another member is imported under, when no node of that member that
    the importer may read has the row's own. Event ids are per owner (``node_event_idempotent``):
    written as they are, the import would occupy that member's id (a later write of theirs with
    it deduplicated onto the importer's row), and it would collide with one the importer may not
    read, an answer that tells that the unreadable node exists. Derived the same way every time,
    so a re-run finds the node it wrote."""
    return "import:" + hashlib.sha256(event_id.encode()).hexdigest()[:40]


def _owner_name(row: dict) -> tuple[str, str]:
    # as ``import_lines`` resolves it: an agent owner wins over a user
    return ("agent", row["owner_agent"]) if row.get("owner_agent") else ("user", row.get("owner_user") or "")


class _Plan:
    """What the validation pass learns for the writing pass: where the file's nodes may already
    be (their event ids and time span) and the first version of each asset (its identity)."""

    def __init__(self, importer: _Importer | None = None):
        self.importer = importer  # who imports through the API (None: the operator's command)
        self.event_ids: set[str] = set()
        self.times: list[dt.datetime] = []
        self.first_version: dict[int, tuple[str, str]] = {}


def _duplicates(kind: str, lineno: int, row: dict, seen: dict[tuple, int]) -> dict[str, list[str]]:
    """Two rows of one file that would be one row (or collide) in the target: refused by line,
    not left to a unique constraint half-way through the write."""
    keys = []
    if kind in ("node", "asset"):
        keys.append(("id", (kind, row["id"]), f"The same {kind} id as line {{}}."))
    if kind == "node" and row.get("event_id"):
        keys.append(("event_id", ("event", _owner_name(row), row["event_id"]),
                     "The same owner and event_id as line {}."))
    if kind == "asset_version":
        keys.append(("version", ("version", row["asset"], row.get("version")),
                     f"Asset {row['asset']} has version {row.get('version')} on line {{}} too."))
    bad: dict[str, list[str]] = {}
    for name, key, message in keys:
        if key in seen:
            bad[name] = [message.format(seen[key])]
        else:
            seen[key] = lineno
    return bad


def _validate(lines: Iterable[str], *, importer: _Importer | None = None) -> _Plan:
    """Every row checked before the first is written, so a bad value anywhere imports nothing and
    the error names every bad line (up to ``_MAX_ERRORS``), not only the first."""
    choices = _choices()
    errors: dict[str, dict[str, list[str]]] = {}
    seen: dict[tuple, int] = {}
    plan = _Plan(importer)
    for lineno, kind, row, bad in _parsed(lines):
        if not bad and kind != "header":
            bad = _bad_values(kind, row, choices)
            bad = bad | _bad_types(kind, row, bad)
            if importer is not None:
                bad = bad | _unreadable_row(kind, row, importer)
            if not bad:
                bad = _duplicates(kind, lineno, row, seen)
        if bad:
            errors[str(lineno)] = bad
            if len(errors) >= _MAX_ERRORS:
                break
        elif kind == "node":
            if row.get("event_id"):
                plan.event_ids.add(row["event_id"])
                if importer is not None and importer.foreign_user_row(row):
                    plan.event_ids.add(_foreign_event_id(row["event_id"]))
            else:
                plan.times.append(_aware(row["occurred_at"]))
        elif kind == "asset_version" and row["version"] == 1:
            plan.first_version[row["asset"]] = (row["title"], row["content_hash"])
    if errors:
        raise ImportInvalid(errors)
    return plan


def _aware(value: str) -> dt.datetime:
    # as the column stores it: a time without an offset is in the default time zone
    t = parse_datetime(value)
    return timezone.make_aware(t) if timezone.is_naive(t) else t


def _md5(text: str) -> str:
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def _node_key(owner: tuple, row: dict) -> tuple:
    if row.get("event_id"):
        return ("event", owner, row["event_id"])
    return ("content", owner, row.get("kind", "leaf"), _aware(row["occurred_at"]), row.get("session_key", ""),
            row.get("seq", 0), _md5(row["text"]))


def _owner_key(owner_user_id, owner_agent_id) -> tuple:
    return ("agent", owner_agent_id) if owner_agent_id else ("user", owner_user_id)


def _importer_reads_nodes(importer: _Importer) -> Q:
    """The nodes an import through the API may match a row to: those the importer may read, by
    the rule of ``memory.selectors.visible_nodes`` (restricted ones by ``restricted_node_q``), with
    deleted ones, plus agents' nodes (the admin acts as any agent). A row matched to a node is
    skipped and the node then stands for it (edges, sources, asset node ids), so matching an
    unreadable one let a file attach edges to another member's private memory, and told by the
    counts whether it existed."""
    from .access import restricted_node_q

    actor = importer.actor
    own = Q(owner_agent=actor.agent) if actor.agent is not None else Q(owner_user=actor.user)
    return (own | Q(owner_agent__isnull=False) | Q(visibility=Visibility.ORG)
            | Q(visibility=Visibility.TEAM, team_id__in=list(actor.team_ids)) | restricted_node_q(actor))


def _existing_nodes(org: Organization, plan: _Plan) -> dict[tuple, deque[int]]:
    """The org's nodes a row of the file may be, by ``_node_key``, oldest first: through the API,
    only those the importer may read (``_importer_reads_nodes``). Deleted ones count: re-running an
    import must not bring back a memory deleted since (unlike a weave, whose event id dedupes against
    live memories only). Live ones come before deleted ones: a row whose memory was deleted and then
    written again under the same event id is the live memory, not the deleted one."""
    q = Q()
    if plan.event_ids:
        q |= Q(event_id__in=plan.event_ids)
    if plan.times:
        q |= Q(event_id="", occurred_at__range=(min(plan.times), max(plan.times)))
    found: dict[tuple, deque[int]] = {}
    if not q:
        return found
    nodes = Node.objects.filter(org=org).filter(q)
    if plan.importer is not None:
        nodes = nodes.filter(_importer_reads_nodes(plan.importer))
    rows = (nodes.annotate(text_md5=MD5("text"), gone=ExpressionWrapper(Q(deleted_at__isnull=False),
                                                                        output_field=BooleanField()))
            .order_by("gone", "id")
            .values_list("id", "owner_user_id", "owner_agent_id", "event_id", "kind", "occurred_at",
                         "session_key", "seq", "text_md5"))
    for nid, user_id, agent_id, event_id, kind, occurred_at, session_key, seq, text_md5 in rows.iterator(2000):
        owner = _owner_key(user_id, agent_id)
        key = (("event", owner, event_id) if event_id
               else ("content", owner, kind, occurred_at, session_key, seq, text_md5))
        found.setdefault(key, deque()).append(nid)
    return found


def _existing_assets(org: Organization, plan: _Plan) -> dict[tuple, deque[int]]:
    """The org's assets by identity, oldest first: by their first version when they have one
    (``("first", ...)``) and by their current content (``("now", ...)``). Through the API only
    those the importer may read (``assets.access.readable_assets``) and agents' assets, as for
    nodes: a match to an unreadable one told that it exists."""
    first = {aid: (title, h) for aid, title, h in
             AssetVersion.objects.filter(org=org, version=1).values_list("asset_id", "title", "content_hash")}
    found: dict[tuple, deque[int]] = {}
    assets = Asset.objects.filter(org=org)
    if plan.importer is not None:
        from .access import readable_assets

        readable = readable_assets(plan.importer.actor).values("id")
        assets = assets.filter(Q(id__in=readable) | Q(owner_agent__isnull=False))
    for aid, user_id, agent_id, kind, title, h in (assets.order_by("id").values_list(
            "id", "owner_user_id", "owner_agent_id", "kind", "title", "content_hash")):
        owner = _owner_key(user_id, agent_id)
        if aid in first:
            found.setdefault(("first", owner, kind, *first[aid]), deque()).append(aid)
        found.setdefault(("now", owner, kind, title, h), deque()).append(aid)
    return found


def _claim(found: dict[tuple, deque[int]], key: tuple, claimed: set[int]) -> int | None:
    """An existing row with this identity not yet matched to another row of the file: a file
    holding the same memory twice imports twice, and a re-run matches each copy to one."""
    ids = found.get(key)
    while ids:
        i = ids.popleft()
        if i not in claimed:
            claimed.add(i)
            return i
    return None


_COLLISIONS = {"node_event_idempotent": "event_id", "edge_unique": "kind", "asset_version_unique": "version"}


def _twice(lines: Iterable[str]) -> Callable[[], Iterable[str]]:
    """The input, readable once to validate and once to write. A list (the API's body) or a file
    (the command) is read again rather than held in memory a second time; only a stream that
    cannot seek (stdin) is buffered."""
    if isinstance(lines, list | tuple):
        return lambda: lines
    seekable = getattr(lines, "seekable", None)
    if seekable is not None and seekable():
        start = lines.tell()

        def again() -> Iterable[str]:
            lines.seek(start)
            return lines

        return again
    buffered = list(lines)
    return lambda: buffered


@transaction.atomic
def import_lines(org: Organization, lines: Iterable[str], *, actor=None) -> dict:
    """Import a file into ``org``, all or nothing. Re-running it (or importing an export back into
    its own org) writes nothing twice: a row already there is counted in ``skipped`` and its id in
    the file still resolves edges, sources and asset node ids to the row that is there.

    "Already there" is decided without any column of its own (the models keep no import
    provenance), by what an import copies verbatim and the same memory keeps:

    * a node with an ``event_id``: its owner and event id, the key of the ``node_event_idempotent``
      constraint (so the same event is the same node even if its text changed since);
    * any other node: owner, kind, ``occurred_at``, session key, seq and text;
    * an asset: owner, kind and its first version's title and content hash (version rows are
      never rewritten, so edits since, here or in the source, do not make it a new asset); without
      a version-1 row in the file, its current title and content hash. Its version rows are then
      skipped too: the asset there has its own history;
    * an edge: its ends and kind (``edge_unique``).

    Each existing row is matched to one row of the file at most, so identical memories imported
    twice on purpose stay two. Imports into one org are serialised, so two runs of the same file at
    once cannot both write it; a collision with a row written meanwhile by anything else is still
    refused by line (``ImportInvalid``), nothing written."""
    read = _twice(lines)
    importer = _Importer.of(org, actor) if actor is not None and getattr(actor, "user", None) is not None else None
    plan = _validate(read(), importer=importer)
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(hashtext('nylon.import'), %s)", [org.id])
    User = get_user_model()
    users = {u.username: u for u in User.objects.filter(memberships__org=org)}
    agents = {a.name: a for a in Agent.objects.filter(org=org)}
    teams = {t.slug: t for t in Team.objects.filter(org=org)}
    existing_nodes, existing_assets = _existing_nodes(org, plan), _existing_assets(org, plan)
    claimed_nodes: set[int] = set()
    claimed_assets: set[int] = set()
    node_map: dict[int, int] = {}
    asset_map: dict[int, Asset] = {}
    kept_assets: set[int] = set()  # file ids of assets already there
    counts = {"node": 0, "edge": 0, "asset": 0, "asset_version": 0, "skipped": 0, "unowned": 0}
    missing: set[str] = set()  # owners and teams the file names that this org does not have
    header = None
    pending_sources: list[tuple[Node, list[int]]] = []

    def owner(row) -> dict | None:
        if row.get("owner_agent"):
            a = agents.get(row["owner_agent"])
            return None if a is None else {"owner_agent": a, "owner_user": None}
        u = users.get(row.get("owner_user") or "")
        return None if u is None else {"owner_user": u, "owner_agent": None}

    def asset_key(who_key: tuple, old_id: int, row: dict) -> tuple:
        first = plan.first_version.get(old_id)
        if first is None and row.get("version", 1) == 1:
            first = (row["title"], row["content_hash"])
        if first is not None:
            return ("first", who_key, row["kind"], *first)
        return ("now", who_key, row["kind"], row["title"], row["content_hash"])

    lineno = 0
    try:
        for lineno, kind, row in _rows(read()):  # noqa: B007 (the line a collision names)
            if header is None:
                header = row
                continue
            if kind in ("node", "asset"):
                who = owner(row)
                team = teams.get(row.get("team") or "")
                if who is None or (row.get("team") and team is None):
                    counts["skipped"] += 1
                    counts["unowned"] += 1
                    if who is None:
                        missing.add(f"agent:{row['owner_agent']}" if row.get("owner_agent")
                                    else f"user:{row.get('owner_user') or ''}")
                    else:
                        missing.add(f"team:{row['team']}")
                    continue
                who_key = _owner_key(getattr(who["owner_user"], "id", None), getattr(who["owner_agent"], "id", None))
                old_id = row.pop("id")
                for k in ("owner_user", "owner_agent", "team"):
                    row.pop(k, None)
                # a row of another member (not the importer's, not an agent's): see _foreign_event_id
                foreign = (importer is not None and who["owner_user"] is not None
                           and who["owner_user"].pk != importer.actor.user.pk)
                if kind == "node":
                    there = _claim(existing_nodes, _node_key(who_key, row), claimed_nodes)
                    if there is None and foreign and row.get("event_id"):
                        # Not a node of that member's the importer may read: written (or found from
                        # an earlier run) under an event id of the import's own, whether or not an
                        # unreadable node has the row's id (see _foreign_event_id).
                        row["event_id"] = _foreign_event_id(row["event_id"])
                        there = _claim(existing_nodes, _node_key(who_key, row), claimed_nodes)
                    if there is not None:
                        node_map[old_id] = there
                        counts["skipped"] += 1
                        continue
                    src_user, src_agent = row.pop("source_user", None), row.pop("source_agent", None)
                    sources = row.pop("source_node_ids", []) or []
                    n = Node(org=org, team=team, source_user=users.get(src_user or ""),
                             source_agent=agents.get(src_agent or ""), **who, **row)
                    n.save()
                    node_map[old_id] = n.id
                    if sources:
                        pending_sources.append((n, sources))
                else:
                    if _claim(existing_assets, asset_key(who_key, old_id, row), claimed_assets) is not None:
                        kept_assets.add(old_id)
                        counts["skipped"] += 1
                        continue
                    approver = users.get(row.pop("approved_by", None) or "")
                    row["node_ids"] = [node_map[i] for i in row.get("node_ids", []) if i in node_map]
                    if row.get("status") == "approved" and row.get("approved_version") is None:
                        # an export from before approved_version: its agents were served the current text
                        row["approved_version"] = row.get("version", 1)
                    a = Asset.objects.create(org=org, team=team, approved_by=approver, **who, **row)
                    asset_map[old_id] = a
                counts[kind] += 1
            elif kind == "edge":
                # node_map holds only nodes the importer may read (written from a row it may read,
                # or matched among readable ones), so both ends of an edge are readable.
                if row["src"] in node_map and row["dst"] in node_map:
                    _, created = Edge.objects.get_or_create(
                        org=org, src_id=node_map[row["src"]], dst_id=node_map[row["dst"]], kind=row["kind"],
                        defaults={"weight": row.get("weight", 0.5)})
                    counts["edge" if created else "skipped"] += 1
                else:
                    counts["skipped"] += 1
            elif kind == "asset_version":
                a = asset_map.get(row.pop("asset"))
                if a is None:  # its asset was skipped, or is already there with its own history
                    counts["skipped"] += 1
                    continue
                row["node_ids"] = [node_map[i] for i in row.get("node_ids", []) if i in node_map]
                if "approved_at" not in row and row.get("version") == a.approved_version \
                        and a.visibility != "private":
                    # an export from before approved_at: its served version was approved (the
                    # migration's rule), or agents would be given an empty history of what they read
                    row["approved_at"] = a.approved_at or a.updated_at
                author = _author(row, users, agents)
                AssetVersion.objects.create(org=org, asset=a, **author, **row)
                counts["asset_version"] += 1
    except IntegrityError as exc:
        # a row written since the look-up above (imports are serialised, other writers are not)
        constraint = getattr(getattr(exc.__cause__, "diag", None), "constraint_name", None) or "a unique key"
        column = _COLLISIONS.get(constraint, "row")
        raise ImportInvalid({str(lineno): {column: [
            f"Collides with a row already in the organisation ({constraint}); nothing was imported."]}}) from None
    for n, sources in pending_sources:
        Node.objects.filter(pk=n.pk).update(source_node_ids=[node_map[i] for i in sources if i in node_map])
    # Rows are matched to owners by name: an org without the file's members, agents or teams gets
    # none of their rows. Said in the answer, not only counted, so a restore into an empty org does
    # not look like a success.
    counts["missing"] = sorted(missing)[:50]
    audit.record(actor=actor, org=org, action="org.import", object_type="org", object_id=org.id,
                 detail={"from": header.get("org"), **counts})
    return counts


def is_member(org: Organization, user) -> bool:
    return Membership.objects.filter(org=org, user=user).exists()
