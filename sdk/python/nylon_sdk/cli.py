"""``nylon``: the command line over ``nylon_sdk.Client``.

Configuration, first found wins: ``--url``/``--key`` flags, ``NYLON_URL``/``NYLON_API_KEY``, the
config file (``$NYLON_CONFIG``, else ``$XDG_CONFIG_HOME/nylon/config.json``, else
``~/.config/nylon/config.json``; written by ``nylon configure`` with mode 0600). With no URL and no
key from any of them a command says so (exit 2) rather than trying ``DEFAULT_URL`` without a key."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .client import Client
from .errors import APIError, AuthError, NylonError, PermissionDenied
from .types import Turn, TurnFieldError, request_scope, with_event_ids

DEFAULT_URL = "http://127.0.0.1:8000"


def config_path() -> Path:
    if os.environ.get("NYLON_CONFIG"):
        return Path(os.environ["NYLON_CONFIG"])
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "nylon" / "config.json"


def load_config() -> dict:
    try:
        return json.loads(config_path().read_text())
    except (OSError, ValueError):
        return {}


def configured(args) -> tuple[str | None, str | None]:
    """The URL and key from the flags, the environment or the config file; None where none says."""
    cfg = load_config()
    url = args.url or os.environ.get("NYLON_URL") or cfg.get("url") or None
    key = args.key or os.environ.get("NYLON_API_KEY") or cfg.get("api_key") or None
    return url, key


def resolve(args) -> tuple[str, str | None]:
    url, key = configured(args)
    return url or DEFAULT_URL, key


NOT_CONFIGURED = """error: nylon is not configured: no service URL or API key (no --url/--key, no NYLON_URL/NYLON_API_KEY,
and no config file at {path}). Run
  nylon configure --url URL --key nyl_…
or set NYLON_URL and NYLON_API_KEY.
"""


# -- input -------------------------------------------------------------------------------------

def _not_json(source: str, line: int, exc: json.JSONDecodeError) -> ValueError:
    return ValueError(f"{source}:{line}: not valid JSON ({exc.msg} at column {exc.colno}); nothing was written")


# A JSON object with "turns" is a weave-session body: these are its fields (memory/apis.py).
FILE_FIELDS = ("session_key", "turns", "visibility", "team_id", "end_session")
_WS = re.compile(r"[ \t\n\r]*")  # JSON's whitespace
_DECODER = json.JSONDecoder()
BOM = "\ufeff"


@dataclasses.dataclass
class WeaveInput:
    """What an input gives ``nylon weave``: its turns, the line each starts on (errors name it), and
    the request fields of a ``{"session_key": …, "turns": […]}`` document (None: not given)."""

    turns: list[Turn]
    lines: list[int]
    session_key: str | None = None
    visibility: str | None = None
    team_id: int | None = None
    end_session: bool | None = None


def _line_at(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


def _array_item_starts(text: str, at: int) -> list[int]:
    """Where each item of the (valid) JSON array at ``text[at]`` starts: json.loads keeps no
    positions, and an error in a turn of a multi-line document should name its line."""
    starts: list[int] = []
    at = _WS.match(text, at + 1).end()
    while text[at] != "]":
        starts.append(at)
        _, at = _DECODER.raw_decode(text, at)
        at = _WS.match(text, at).end()
        if text[at] == ",":
            at = _WS.match(text, at + 1).end()
    return starts


def _object_member_starts(text: str, at: int) -> dict[str, tuple[int, int]]:
    """key -> (where the key starts, where its value starts) of the (valid) JSON object at
    ``text[at]``; of a repeated key, the last, as json.loads keeps."""
    members: dict[str, tuple[int, int]] = {}
    at = _WS.match(text, at + 1).end()
    while text[at] != "}":
        key_at = at
        key, at = _DECODER.raw_decode(text, at)
        at = _WS.match(text, _WS.match(text, at).end() + 1).end()  # past the ':'
        members[key] = (key_at, at)
        _, at = _DECODER.raw_decode(text, at)
        at = _WS.match(text, at).end()
        if text[at] == ",":
            at = _WS.match(text, at + 1).end()
    return members


def _coerce(value: Any, source: str, line: int, *, json_lines: bool = False) -> Turn:
    try:
        return Turn.coerce(value)
    except TurnFieldError as exc:
        hint = ""
        if json_lines and exc.field in FILE_FIELDS:
            hint = ('; a line of JSON lines is one turn: a session\'s fields go in one {"session_key": …, '
                    '"turns": […]} document')
        raise ValueError(f"{source}:{line}: {exc.detail}{hint}; nothing was written") from None
    except TypeError as exc:
        raise ValueError(f"{source}:{line}: {exc}; nothing was written") from None


def _read_document(text: str, doc: object, source: str) -> WeaveInput:
    """A JSON document: a list of turns, one turn object, or a weave-session body with "turns"."""
    at = _WS.match(text).end()
    fields: dict = {}
    if isinstance(doc, dict) and "turns" in doc:
        members = _object_member_starts(text, at)
        for name in doc:
            if name not in FILE_FIELDS:
                raise ValueError(f"{source}:{_line_at(text, members[name][0])}: unknown field {name!r} (a document "
                                 f"with \"turns\" takes {', '.join(FILE_FIELDS)}); nothing was written")
        fields = {k: v for k, v in doc.items() if k != "turns"}
        if "session_key" in fields and not isinstance(fields["session_key"], str):
            raise ValueError(f"{source}:{_line_at(text, members['session_key'][1])}: session_key is not a string; "
                             "nothing was written")
        doc, at = doc["turns"], members["turns"][1]
    # One turn object (bare, or as "turns") is a list of one: it returned early once, without the
    # document's fields, so a private {"visibility": "private", "turns": {…}} was written org-wide.
    if isinstance(doc, dict):
        doc, starts = [doc], [at]
    elif isinstance(doc, list):
        starts = _array_item_starts(text, at)
    else:  # valid JSON of another shape ({"turns": "hello"}, a bare number)
        raise ValueError(f'{source}: expected a list of turns, {{"turns": [...]}} or JSON lines; nothing was written')
    lines = [_line_at(text, start) for start in starts]
    return WeaveInput([_coerce(t, source, n) for t, n in zip(doc, lines, strict=True)], lines, **fields)


def _json_lines_after(text: str, n: int) -> bool:
    """Whether the non-empty lines after line ``n`` are each a JSON object of its own."""
    rest = [line for line in text.splitlines()[n:] if line.strip()]
    if not rest:
        return False
    for line in rest[:20]:
        try:
            if not isinstance(json.loads(line), dict):
                return False
        except json.JSONDecodeError:
            return False
    return True


def read_input(text: str, source: str = "<stdin>") -> WeaveInput:
    """A JSON list (of strings or turn objects), a weave-session body ``{"turns": [...]}`` (with
    its ``session_key``, ``visibility``, ``team_id``, ``end_session`` if given), JSONL (one turn a
    line), or plain text (one turn a non-empty line). A line that is not JSON, a turn field or a
    document field the API does not take, is a ValueError naming ``source`` and its line number
    (the whole input is read before anything is sent)."""
    # A byte order mark (Windows editors, PowerShell) is not whitespace to str.strip(): the input
    # did not start with "[" or "{", and a JSON document was woven as one plain-text turn.
    text = text.removeprefix(BOM)
    stripped = text.strip()
    if not stripped:
        return WeaveInput([], [])
    if stripped[0] in "[{":
        doc_error: json.JSONDecodeError | None = None
        try:
            doc = json.loads(text)  # not ``stripped``: the error's line number is the file's
        except json.JSONDecodeError as exc:
            doc, doc_error = None, exc
        if doc is not None:
            return _read_document(text, doc, source)
        turns, lines = [], []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                # A first line that is not JSON on its own: one JSON document over many lines (a
                # list, or an object pretty-printed), whose own error says where it breaks; unless
                # the lines after it are JSON objects each, JSON lines whose first is broken (the
                # document's error named line 2 of a file whose line 1 lacked its "}").
                if not turns and not _json_lines_after(text, n):
                    raise _not_json(source, doc_error.lineno, doc_error) from None
                raise _not_json(source, n, exc) from None
            turns.append(_coerce(value, source, n, json_lines=True))
            lines.append(n)
        return WeaveInput(turns, lines)
    # the texts of the stripped input, as before (the input's ends trimmed); the same lines of the input
    lines = [n for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    return WeaveInput([Turn(text=line) for line in stripped.splitlines() if line.strip()], lines)


def read_turns(text: str, source: str = "<stdin>") -> list[Turn]:
    """The turns of ``read_input`` (a document's request fields are not among them)."""
    return read_input(text, source).turns


def batches(items: list, size: int) -> Iterator[list]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


class Progress:
    """A one-line progress bar on stderr."""

    def __init__(self, total: int, label: str, enabled: bool = True, width: int = 30):
        self.total, self.label, self.enabled, self.width = max(total, 1), label, enabled, width
        self.done = 0
        self.t0 = time.monotonic()

    def advance(self, n: int) -> None:
        self.done += n
        if not self.enabled:
            return
        filled = int(self.width * self.done / self.total)
        rate = self.done / max(time.monotonic() - self.t0, 1e-6)
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (self.width - filled)}] "
                         f"{self.done}/{self.total} {rate:.0f}/s")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


# -- output ------------------------------------------------------------------------------------

# C0 controls but tab and newline, DEL, and C1 controls (U+0080-U+009F: 8-bit CSI/OSC/ST...).
# and the bidirectional overrides and isolates, which show text in another order than it is stored
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: object) -> str:
    """``text`` without control characters but tab and newline, for the terminal. What the server
    sends holds other people's memories and assets verbatim: an ESC sequence in one (an OSC 52
    clipboard write, a cursor move, hidden text) would otherwise be run by the terminal of whoever
    prints it. Carriage returns go too: one can overwrite a line with text that is not in it."""
    return _CONTROLS.sub("", str(text))


def say(text: object = "", *, file=None) -> None:
    """``print`` for text built from the server's answer (every text-mode output of a command)."""
    print(printable(text), file=file)


def table(rows: Iterable[list], headers: list[str], max_width: int = 70) -> str:
    def cell(v) -> str:
        s = " ".join(printable(v).split())
        return s if len(s) <= max_width else s[:max_width - 1] + "…"

    rows = [[cell(v) for v in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


def emit(obj) -> None:
    # json.dumps escapes C0 controls but leaves C1 ones (U+0080-U+009F) raw with ensure_ascii=False;
    # escape them too, still valid JSON of the same value.
    text = json.dumps(obj, indent=2, ensure_ascii=False, default=str)
    print(re.sub("[\x7f-\x9f]", lambda m: f"\\u{ord(m.group()):04x}", text))


# -- commands ----------------------------------------------------------------------------------

def check_key(url: str, key: str, timeout: float) -> tuple[str, str]:
    """Whether the server at ``url`` accepts ``key``: ("ok", who it is), ("rejected", why: a 401),
    ("forbidden", why: a valid key without the read scope), or ("unchecked", why: the server could
    not say)."""
    try:
        with Client(url, key, timeout=timeout, max_retries=1) as client:
            me = client.org()
    except AuthError as exc:
        return "rejected", str(exc)
    except PermissionDenied as exc:
        return "forbidden", str(exc)  # authenticated all the same
    except NylonError as exc:
        return "unchecked", str(exc)
    me = me if isinstance(me, dict) else {}
    actor = me.get("actor") or {}
    scopes = ", ".join(actor.get("scopes") or []) or "none"
    return "ok", f"{actor.get('label', '?')} in {me.get('name', '?')} (scopes: {scopes})"


def cmd_configure(args, _client) -> int:
    path = config_path()
    cfg = load_config()
    if args.url:
        cfg["url"] = args.url
    if args.key:
        cfg["api_key"] = args.key
    if cfg.get("api_key") and not args.no_check:
        # Checked before it is saved: a mistyped key used to be saved without a word, and every later
        # command then failed with a 401.
        url = args.url or os.environ.get("NYLON_URL") or cfg.get("url") or DEFAULT_URL
        state, detail = check_key(url, cfg["api_key"], args.timeout)
        if state == "rejected":
            say(f"error: {url} rejects this key ({detail}); not saved. Check the key, or save it anyway "
                "with --no-check.", file=sys.stderr)
            return 1
        if state == "unchecked":
            say(f"error: could not check the key at {url} ({detail}); not saved. Check --url, or save "
                "without checking with --no-check.", file=sys.stderr)
            return 3
        say(f"key ok: {detail}" if state == "ok" else f"key accepted, but: {detail}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(cfg, f, indent=2)
    print(f"wrote {path}")
    return 0


def cmd_health(args, client: Client) -> int:
    """The service's health (public: it says nothing of the key), then whether the server accepts the
    configured key: "status: ok" with a bad key read as all being well."""
    h = client.health()
    key = getattr(args, "api_key", None)
    if not key:
        key_state, key_detail = "none", "no key configured (nylon configure --key …)"
    else:
        key_state, key_detail = check_key(args.url_resolved, key, args.timeout)
    if args.json:
        emit({**h.raw, "key": {"status": key_state, "detail": key_detail}})
    else:
        say(f"status: {h.status}")
        for name, c in h.raw.get("checks", {}).items():
            say(f"  {name:<9} {c.get('status', '?'):<9} {c.get('detail', '')}")
        label = {"ok": "ok", "rejected": "REJECTED", "forbidden": "accepted, but", "none": "none",
                 "unchecked": "not checked"}[key_state]
        say(f"key: {label}: {key_detail}" if key_state != "none" else f"key: {key_detail}")
    if key_state == "rejected":
        return 1  # the service is up, but nothing the CLI does with this key will work
    return 0 if h.status in ("ok", "degraded") else 1


def weave_scope(args, given: WeaveInput, source: str) -> dict:
    """The visibility and team_id of every request: the flag, else the file's, else what the turns
    name. The API takes them per request, so a turn (or file) that says otherwise is refused by
    line, not sent with another scope: a turn marked private was written org-wide that way."""
    flags = {"visibility": ("--visibility", args.visibility), "team_id": ("--team", args.team)}
    for name, (flag, value) in flags.items():
        own = getattr(given, name)
        if value is not None and own is not None and own != value:
            raise ValueError(f"{source}: {flag} {value!r} differs from the file's {name} {own!r}; "
                             "nothing was written")

    def request(name: str) -> str:
        flag, value = flags[name]
        return flag if value is not None else f"the file's {name}"

    visibility = args.visibility if args.visibility is not None else given.visibility
    team_id = args.team if args.team is not None else given.team_id
    try:
        return request_scope(given.turns, visibility=visibility, team_id=team_id, request=request,
                             where=lambda i: f"line {given.lines[i]}")
    except TurnFieldError as exc:
        raise ValueError(f"{source}:{given.lines[exc.index]}: {exc.detail}; nothing was written") from None


def cmd_weave(args, client: Client) -> int:
    stdin = args.file in (None, "-")
    # utf-8-sig: a file's byte order mark is not its first character (see read_input); stdin's is
    # dropped here too, so that the same input with or without one is the same cli-<hash> session
    text = (sys.stdin.read() if stdin else Path(args.file).read_text(encoding="utf-8-sig")).removeprefix(BOM)
    source = "<stdin>" if stdin else args.file
    given = read_input(text, source)
    turns = given.turns
    if args.speaker:  # who said the turns that name no speaker of their own
        turns = [t if t.speaker else dataclasses.replace(t, speaker=args.speaker) for t in turns]
    if not turns:
        print("nothing to weave", file=sys.stderr)
        return 1
    # Checked over the whole input before the first batch is sent, so that no batch is written with
    # a scope another batch's turn contradicts.
    scope = weave_scope(args, given, source)
    # --session, else the file's own session_key (it was ignored: its turns went to cli-<hash>), else
    # the input's: running the same file again (an import cut short) sends its turns to the same
    # session, so their event_ids are replays (200) rather than reuses (409).
    if args.session:
        session = args.session
    elif given.session_key is not None:
        session = given.session_key
    else:
        session = "cli-" + hashlib.sha256(text.encode()).hexdigest()[:16]
    # Plain text and id-less JSON turns carry no event_id, and the server dedupes on nothing else: a
    # re-run wrote every turn again. Ids derived from the session and each turn's content make it a
    # replay, and give an edited text or speaker a new id (a new memory) rather than a 409
    # event_id_reused; an edited occurred_at, or another --visibility / --team, is a 409 (nothing written).
    turns = with_event_ids(session, turns, prefix="cli-")
    progress = Progress(len(turns), "weave", enabled=not args.quiet)
    node_ids: list[int] = []
    created = 0
    chunks = list(batches(turns, args.batch))
    for n, chunk in enumerate(chunks, 1):
        # the file's end_session ends the session once, with its last turns
        res = client.weave_session(session, chunk, end_session=bool(given.end_session) and n == len(chunks),
                                   **scope)
        node_ids += res.node_ids
        created += res.created
        progress.advance(len(chunk))
    progress.close()
    if args.json:
        emit({"session_key": session, "node_ids": node_ids, "created": created})
    else:
        say(f"woven {len(turns)} turns into session {session} ({len(node_ids)} nodes: {created} new, "
            f"{len(turns) - created} already stored)")
    return 0


def cmd_resonate(args, client: Client) -> int:
    res = client.resonate(args.query, k=args.k, depth=args.depth, reinforce=not args.no_reinforce)
    if args.json:
        emit(res.raw)
        return 0
    rows = []
    for i, h in enumerate(res.hits, 1):
        # a channel that did not rank the hit has no rank (null): not shown
        why = ",".join(f"{c}#{r}" for c, r in sorted((h.explanation.channels or {}).items()) if r is not None)
        # as the context's lines: a memory in an open conflict names the other side
        disputed = "".join(f" [disputed by #{d['node_id']}]" for d in h.disputed_by)
        rows.append([i, f"{h.score:.3f}", h.node_id, h.kind, why or f"hop {h.explanation.hops}", h.text + disputed])
    say(table(rows, ["#", "score", "node", "kind", "why", "text"]))
    route = res.route or {}
    say(f"\n{len(res.hits)} hits · route {route.get('qtype', '?')}/depth {route.get('depth', '?')} · "
          f"{res.timing_ms.get('total', 0):.1f} ms · served by {res.served_by}"
          + (f" · degraded: {', '.join(res.degraded)}" if res.degraded else ""))
    return 0


def budget_arg(value: str) -> tuple[str, int]:
    """``--budget max_recall_chars=1000``: one limit of the context, a name and a whole number."""
    name, sep, number = value.partition("=")
    try:
        if not sep or not name.strip():
            raise ValueError
        return name.strip(), int(number)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME=NUMBER, e.g. max_recall_chars=1000, not {value!r}") from None


def cmd_context(args, client: Client) -> int:
    ctx = client.context(args.query, k=args.k, reinforce=not args.no_reinforce,
                         budget=dict(args.budget or []) or None)
    if ctx is None:
        print("this server has no context endpoint", file=sys.stderr)
        return 2
    if args.json:
        emit(ctx.raw)
        return 0
    say(ctx.context)
    say("\n" + context_summary(ctx))
    return 0


def context_summary(ctx) -> str:
    """One line under the context text: what it holds and what was cut, left out or degraded."""
    parts = [f"stable_hash {ctx.stable_hash[:12]}", f"{len(ctx.persona)} in full",
             f"{len(ctx.scenario_index)} in the index", f"{len(ctx.recall)} recalled"]
    if ctx.no_match:
        parts.append("no match for the query")
    for label, counts in (("truncated", ctx.truncated), ("dropped", ctx.dropped)):
        cut = ", ".join(f"{part} {n}" for part, n in (counts or {}).items() if n)
        if cut:
            parts.append(f"{label}: {cut}")
    if ctx.degraded:
        parts.append("degraded: " + "; ".join(f"{d} ({ctx.degraded_reasons[d]})" if d in ctx.degraded_reasons
                                              else d for d in ctx.degraded))
    return "-- " + " · ".join(parts)


def cmd_nodes(args, client: Client) -> int:
    if args.action == "get":
        emit(client.get_node(args.id).raw)
    elif args.action == "delete":
        client.delete_node(args.id)
        print(f"deleted node {args.id}")
    else:
        nodes = client.iter_nodes(kind=args.kind, session_key=args.session)
        items = [n for _, n in zip(range(args.limit), nodes, strict=False)]
        if args.json:
            emit([n.raw for n in items])
        else:
            say(table([[n.id, n.kind, n.speaker, n.visibility, n.text] for n in items],
                        ["id", "kind", "speaker", "visibility", "text"]))
    return 0


def _when(node: dict) -> datetime:
    value = str(node.get("occurred_at") or "")
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return when if when.tzinfo else when.replace(tzinfo=UTC)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)  # comparable with the aware times of the other side


def newer_side(conflict) -> tuple[dict, dict]:
    """(kept, superseded): the side that happened later (``occurred_at``), the later written (higher
    id) when both happened at the same time."""
    a, b = conflict.node_a, conflict.node_b
    if (_when(b), b.get("id", 0)) > (_when(a), a.get("id", 0)):
        return b, a
    return a, b


def cmd_conflicts(args, client: Client) -> int:
    if args.action == "resolve":
        keep = args.keep
        if args.resolution == "supersede" and keep is None:
            # The server needs the side to keep: by default the newer memory, said so before it is done.
            conflict = next((c for c in client.iter_conflicts() if c.id == args.id), None)
            if conflict is None:
                say(f"error: no conflict {args.id} visible to this key", file=sys.stderr)
                return 1
            kept, superseded = newer_side(conflict)
            keep = kept.get("id")
            say(f"keeping the newer memory {keep} ({kept.get('occurred_at') or '?'}: {kept.get('text', '')!s:.60}); "
                f"superseding memory {superseded.get('id')} ({superseded.get('occurred_at') or '?'}). "
                "Pass --keep ID to choose.", file=sys.stderr)
        emit(client.resolve_conflict(args.id, args.resolution, keep=keep).raw)
        return 0
    items = list(client.iter_conflicts(status=args.status))
    if args.json:
        emit([c.raw for c in items])
    else:
        say(table([[c.id, c.status, c.node_a.get("id"), c.node_b.get("id"), c.reason] for c in items],
                    ["id", "status", "a", "b", "reason"]))
    return 0


ADMIN_ONLY = """\
nylon {command}: not available from the CLI. The CLI authenticates with an agent key, and the
service lets only organisation admins {verb} the organisation's memory (agent keys get 403).
Instead:
  - as an org admin signed in to the console, with that session's cookies:
    GET /api/v1/export (JSONL) and POST /api/v1/import with {{"jsonl": "..."}}
    (plus the X-CSRFToken header);
  - as the operator, on the server: manage.py export_memory --org SLUG [--out FILE]
    and manage.py import_memory --org SLUG FILE.
"""


def cmd_admin_only(args, _client) -> int:
    # No request is sent: with an agent key the answer can only be 403, which told nobody where
    # export and import actually are.
    verb = "export" if args.command == "export" else "import into"
    sys.stderr.write(ADMIN_ONLY.format(command=args.command, verb=verb))
    return 2


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nylon", description="Nylon team memory from the command line.")
    p.add_argument("--url", help="service URL (env NYLON_URL)")
    p.add_argument("--key", help="agent API key (env NYLON_API_KEY)")
    p.add_argument("--timeout", type=float, default=30.0)
    # The same flags after the command too (`nylon configure --url … --key …`, as documented).
    # SUPPRESS: a subcommand that was not given them must not reset what came before the command.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=argparse.SUPPRESS, help="service URL (env NYLON_URL)")
    common.add_argument("--key", default=argparse.SUPPRESS, help="agent API key (env NYLON_API_KEY)")
    common.add_argument("--timeout", type=float, default=argparse.SUPPRESS)
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("configure", parents=[common],
                       help="save URL and key to the config file (the key is checked with the server first)")
    s.add_argument("--no-check", action="store_true", help="save the key without checking it with the server")
    s.set_defaults(fn=cmd_configure, needs_client=False)

    s = sub.add_parser("health", parents=[common],
                       help="service health, and whether the server accepts the key (exit 1 if it rejects it)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_health)

    s = sub.add_parser("weave", parents=[common], help="write turns from stdin or a text/JSON/JSONL file")
    s.add_argument("file", nargs="?", help="path, or - for stdin (default)")
    s.add_argument("--session", help="session key; wins over a {\"session_key\": …, \"turns\": […]} file's own "
                                     "(default: the file's session_key, else cli-<hash of the input>). A turn "
                                     "without an event_id "
                                     "gets one from the session, its speaker and its text, so a re-run of the same "
                                     "input writes nothing again and finishes an import cut short. An edited "
                                     "file is another input, so another session with all its turns: re-run it "
                                     "with the first run's --session to write only the new or changed turns (a "
                                     "changed turn is a new memory; the old one stays)")
    s.add_argument("--speaker", help="who said the turns (those that name no speaker of their own)")
    s.add_argument("--visibility", choices=["private", "team", "org", "restricted"],
                   help="who may read the turns (default: the file's visibility, else the one its turns name, else "
                        "the agent's default). A turn or file naming another one is an error, as the API "
                        "takes one per request")
    s.add_argument("--team", type=int, help="the team of team-visible turns (default: the file's team_id)")
    s.add_argument("--batch", type=int, default=200, help="turns per request")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_weave)

    s = sub.add_parser("resonate", parents=[common], help="retrieve memories for a query")
    s.add_argument("query")
    s.add_argument("-k", type=int, default=10)
    s.add_argument("--depth", type=int)
    s.add_argument("--no-reinforce", action="store_true")
    s.add_argument("--json", action="store_true", help="the full answer with explanations")
    s.set_defaults(fn=cmd_resonate)

    s = sub.add_parser("context", parents=[common], help="the agent context bundle for a query")
    s.add_argument("query", nargs="?", default="")
    s.add_argument("-k", type=int, help="recalled memories wanted (raises the default max_recall_items)")
    s.add_argument("--budget", type=budget_arg, action="append", metavar="NAME=N",
                   help="a limit of the context, repeatable: max_recall_chars, max_recall_items, "
                        "max_chars_per_memory, max_chars_per_asset, max_stable_chars, max_index_entries, "
                        "max_chars_per_index_line")
    s.add_argument("--no-reinforce", action="store_true")
    s.add_argument("--json", action="store_true", help="the whole answer as JSON (default: the text and a summary)")
    s.set_defaults(fn=cmd_context)

    s = sub.add_parser("nodes", parents=[common], help="list, show or delete memory nodes")
    s.add_argument("action", choices=["list", "get", "delete"])
    s.add_argument("id", nargs="?", type=int)
    s.add_argument("--kind")
    s.add_argument("--session")
    s.add_argument("--limit", type=int, default=50)
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_nodes)

    s = sub.add_parser("conflicts", parents=[common], help="list or resolve conflicts")
    s.add_argument("action", choices=["list", "resolve"])
    s.add_argument("id", nargs="?", type=int)
    s.add_argument("resolution", nargs="?", choices=["keep_both", "supersede", "reject"])
    s.add_argument("--keep", type=int, help="supersede: the memory to keep (default: the newer one)")
    s.add_argument("--status")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_conflicts)

    # Kept as commands only to say where export and import live (org admins, not agent keys);
    # the arguments they used to take are still accepted so the old spellings get that answer.
    s = sub.add_parser("export", parents=[common], help="org admins only: says where export lives")
    s.add_argument("-o", "--output", help=argparse.SUPPRESS)
    s.set_defaults(fn=cmd_admin_only)

    s = sub.add_parser("import", parents=[common], help="org admins only: says where import lives")
    s.add_argument("file", nargs="?", help=argparse.SUPPRESS)
    s.set_defaults(fn=cmd_admin_only)
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.command == "configure":
        return cmd_configure(args, None)
    if args.fn is cmd_admin_only:
        return cmd_admin_only(args, None)
    if args.command in ("nodes",) and args.action in ("get", "delete") and args.id is None:
        p.error(f"nodes {args.action} needs an id")
    if args.command == "conflicts" and args.action == "resolve" and (args.id is None or not args.resolution):
        p.error("conflicts resolve needs an id and a resolution")
    given_url, key = configured(args)
    if given_url is None and key is None:
        # Nothing says where the service is: the default URL with no key only ever answered with a
        # connection error (or a 401), which did not say that nylon was never configured.
        sys.stderr.write(NOT_CONFIGURED.format(path=config_path()))
        return 2
    url = given_url or DEFAULT_URL
    args.api_key, args.url_resolved = key, url
    try:
        with Client(url, key, timeout=args.timeout) as client:
            return args.fn(args, client)
    except APIError as exc:  # the message and fields are the server's
        say(f"error: {exc}", file=sys.stderr)
        if isinstance(exc, AuthError) and key is None:
            say("no API key is configured: run nylon configure --key nyl_… (or set NYLON_API_KEY)",
                file=sys.stderr)
        return 1
    except NylonError as exc:
        say(f"error: {exc} ({url})", file=sys.stderr)
        if given_url is None:
            say(f"{url} is the default service URL, as none is configured: run nylon configure --url URL "
                "(or set NYLON_URL)", file=sys.stderr)
        return 3
    except BrokenPipeError:
        # The reader left (`nylon nodes list | head`): no "error: [Errno 32] Broken pipe", and no
        # second one when Python flushes stdout at exit. 141: what a shell reports for SIGPIPE.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (OSError, ValueError) as exc:
        say(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
