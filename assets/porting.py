"""Export and import of an org's memory (nodes, edges, assets, asset versions) as JSONL.

One JSON object per line, ``{"type": "header" | "node" | "edge" | "asset" | "asset_version", ...}``.
Rows refer to each other by their ids in the source org and to people by portable names (username,
agent name, team slug), so a file imports into any org: ids are remapped, owners are matched by
name among the target org's members and agents, and a row whose owner (or team, for team rows)
does not exist there is skipped and counted, never given to someone else.

Through the API an org admin exports exactly what it may read (``visible_nodes`` and
``readable_assets``): other people's private rows, restricted rows without a grant and team rows
of teams it is not in stay out. The management
commands run as the operator (no tenant actor) and export everything.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Iterator

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from memory.models import Edge, Node, Visibility
from teams.models import Agent, Membership, Organization, Team

from . import audit
from .models import Asset, AssetVersion

FORMAT = "nylon-export"
FORMAT_VERSION = 1
_REF_FIELDS = {"id", "org", "owner_user", "owner_agent", "team", "source_user", "source_agent", "embedding",
               "approved_by", "asset", "src", "dst", "search", "txid"}


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
        for v in AssetVersion.objects.filter(asset=a).order_by("version"):
            yield json.dumps({"type": "asset_version", "asset": a.id, **_fields(v)}, ensure_ascii=False)


# The columns an exported row carries besides its model's own (``_fields``): references by id in
# the source org or by portable name. Nothing else is imported: a row cannot name an ``org_id``,
# an ``owner_user_id`` or any column the export does not write.
_ROW_REFS = {
    "node": {"id", "owner_user", "owner_agent", "team", "source_user", "source_agent", "embedding"},
    "asset": {"id", "owner_user", "owner_agent", "team", "approved_by"},
    "asset_version": {"asset"},
    "edge": {"src", "dst", "kind", "weight"},
}


def _check_columns(kind, row: dict) -> None:
    model = {"node": Node, "asset": Asset, "asset_version": AssetVersion}.get(kind)
    if kind not in _ROW_REFS:
        return  # an unknown type is refused by import_lines itself
    allowed = set(_ROW_REFS[kind])
    if model is not None:
        allowed |= {f.attname for f in model._meta.concrete_fields if f.name not in _REF_FIELDS and not f.is_relation}
    unknown = sorted(set(row) - allowed)
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


_REQUIRED = {"edge": ("kind",)}  # without it the row means nothing (node and asset columns have defaults)


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


def _rows(lines: Iterable[str]) -> Iterator[tuple[int, str, dict]]:
    """(line number, row type, row) of every non-blank line, the header first, after the checks of
    the file's shape: JSON objects, a supported header, known row types and columns."""
    header = False
    for lineno, raw in enumerate(lines, start=1):
        raw = raw.strip()
        if not raw:
            continue
        row = json.loads(raw)
        if not isinstance(row, dict):
            raise ValueError("Every line must be a JSON object.")
        kind = row.pop("type", None)
        if not header:
            if kind != "header" or row.get("format") != FORMAT or row.get("version") != FORMAT_VERSION:
                raise ValueError("Not a Nylon export (format header missing or unsupported).")
            header = True
        elif kind not in _ROW_REFS:
            raise ValueError(f"Unknown row type: {kind!r}.")
        else:
            _check_columns(kind, row)
        yield lineno, kind, row
    if not header:
        raise ValueError("Empty file.")


_OWNER_ONLY = {"private", "restricted"}


def _foreign_private(kind: str, row: dict, importer: str) -> dict[str, list[str]]:
    """An org admin may not read another member's private memory, nor restricted memory without a
    grant, so an import through the API may not write any either: such rows owned by a user must be
    the importer's own. Agents' rows are allowed: an org admin already acts as any agent of the org
    (it mints their keys). The operator's ``manage.py import_memory``, a full restore, has no importer."""
    if kind not in ("node", "asset") or row.get("visibility") not in _OWNER_ONLY:
        return {}
    if row.get("owner_agent") or row.get("owner_user") == importer:
        return {}
    return {"owner_user": [f"{row['visibility']} memory of a member is imported through the API only by "
                           f"that member ({importer} is not {row.get('owner_user')}); a full restore is "
                           "`manage.py import_memory`."]}


def _validate(lines: Iterable[str], *, importer: str | None = None) -> None:
    """Every row checked before the first is written, so a bad value anywhere imports nothing and
    the error names every bad line (up to ``_MAX_ERRORS``), not only the first."""
    choices = _choices()
    errors: dict[str, dict[str, list[str]]] = {}
    for lineno, kind, row in _rows(lines):
        bad = _bad_values(kind, row, choices)
        if importer is not None:
            bad = bad | _foreign_private(kind, row, importer)
        if bad:
            errors[str(lineno)] = bad
            if len(errors) >= _MAX_ERRORS:
                break
    if errors:
        raise ImportInvalid(errors)


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
    read = _twice(lines)
    user = getattr(actor, "user", None)
    _validate(read(), importer=user.get_username() if actor is not None and user is not None else None)
    User = get_user_model()
    users = {u.username: u for u in User.objects.filter(memberships__org=org)}
    agents = {a.name: a for a in Agent.objects.filter(org=org)}
    teams = {t.slug: t for t in Team.objects.filter(org=org)}
    node_map: dict[int, int] = {}
    asset_map: dict[int, Asset] = {}
    counts = {"node": 0, "edge": 0, "asset": 0, "asset_version": 0, "skipped": 0}
    header = None
    pending_sources: list[tuple[Node, list[int]]] = []

    def owner(row) -> dict | None:
        if row.get("owner_agent"):
            a = agents.get(row["owner_agent"])
            return None if a is None else {"owner_agent": a, "owner_user": None}
        u = users.get(row.get("owner_user") or "")
        return None if u is None else {"owner_user": u, "owner_agent": None}

    for _, kind, row in _rows(read()):
        if header is None:
            header = row
            continue
        if kind in ("node", "asset"):
            who = owner(row)
            team = teams.get(row.get("team") or "")
            if who is None or (row.get("team") and team is None):
                counts["skipped"] += 1
                continue
            old_id = row.pop("id")
            for k in ("owner_user", "owner_agent", "team"):
                row.pop(k, None)
            if kind == "node":
                src_user, src_agent = row.pop("source_user", None), row.pop("source_agent", None)
                sources = row.pop("source_node_ids", []) or []
                n = Node(org=org, team=team, source_user=users.get(src_user or ""),
                         source_agent=agents.get(src_agent or ""), **who, **row)
                n.save()
                node_map[old_id] = n.id
                if sources:
                    pending_sources.append((n, sources))
            else:
                approver = users.get(row.pop("approved_by", None) or "")
                row["node_ids"] = [node_map[i] for i in row.get("node_ids", []) if i in node_map]
                a = Asset.objects.create(org=org, team=team, approved_by=approver, **who, **row)
                asset_map[old_id] = a
            counts[kind] += 1
        elif kind == "edge":
            if row["src"] in node_map and row["dst"] in node_map:
                Edge.objects.get_or_create(org=org, src_id=node_map[row["src"]], dst_id=node_map[row["dst"]],
                                           kind=row["kind"], defaults={"weight": row["weight"]})
                counts["edge"] += 1
            else:
                counts["skipped"] += 1
        elif kind == "asset_version":
            a = asset_map.get(row.pop("asset"))
            if a is None:
                counts["skipped"] += 1
                continue
            row["node_ids"] = [node_map[i] for i in row.get("node_ids", []) if i in node_map]
            AssetVersion.objects.create(org=org, asset=a, **row)
            counts["asset_version"] += 1
    for n, sources in pending_sources:
        Node.objects.filter(pk=n.pk).update(source_node_ids=[node_map[i] for i in sources if i in node_map])
    audit.record(actor=actor, org=org, action="org.import", object_type="org", object_id=org.id,
                 detail={"from": header.get("org"), **counts})
    return counts


def is_member(org: Organization, user) -> bool:
    return Membership.objects.filter(org=org, user=user).exists()
