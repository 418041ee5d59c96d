"""What the sync and async clients share: the request table, response decoding, retry decisions.

Every API method builds a ``Call`` (method, path, body, how to parse the answer); the sync client
runs it with ``httpx.Client``, the async one with ``httpx.AsyncClient``. So the two clients cannot
drift apart: the endpoint methods below are written once and return the parsed value (sync) or an
awaitable of it (async)."""

from __future__ import annotations

import email.utils
import json
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx

from . import errors
from .types import (
    Conflict,
    Context,
    Health,
    Hit,
    Node,
    Page,
    ResonateResult,
    Turn,
    WeaveResult,
    request_scope,
)

__version__ = "0.1.0"
API = "/api/v1"
RETRY_STATUSES = frozenset({429, 503})
# The longest Retry-After the clients wait out by default. The server's rate limit is per minute
# (NYLON_RATE_LIMIT, 6000/min), so its 429 says up to 60 s: a cap of 30 raised those at once, the
# "retried, honouring Retry-After" of the README true only for short waits. The margin covers an
# HTTP-date Retry-After read against a clock a few seconds off.
DEFAULT_MAX_RETRY_WAIT = 65.0


@dataclass
class Call:
    method: str
    path: str
    json: Any = None
    params: dict | None = None
    parse: Callable[[Any], Any] = lambda body: body
    ok_statuses: frozenset[int] = frozenset()  # non-2xx answers that are a result, not an error
    headers: dict = field(default_factory=dict)


@dataclass
class RetryPolicy:
    """Retries on 429/503 (and connection errors): ``Retry-After`` when the server gives one,
    else exponential backoff with jitter (capped at ``max_wait`` too). A server wait longer than
    ``max_wait`` seconds (default 65: a per-minute rate limit's wait is waited out) is not slept
    through: the error (``RateLimited`` for a 429) is raised at once with its ``retry_after``."""

    max_retries: int = 3
    backoff: float = 0.5
    max_wait: float = DEFAULT_MAX_RETRY_WAIT

    def wait(self, attempt: int, retry_after: float | None) -> float | None:
        if attempt >= self.max_retries:
            return None
        if retry_after is not None:
            return retry_after if retry_after <= self.max_wait else None
        return min(self.max_wait, self.backoff * (2 ** attempt)) * (0.5 + random.random() / 2)


def parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def is_json_type(content_type: str) -> bool:
    """``application/json`` or a ``+json`` suffix type (``application/problem+json``). Not
    ``application/x-ndjson``: JSON lines are text, and a one-line body that happens to parse as a
    single JSON value must not turn into a dict."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def decode(response: httpx.Response) -> Any:
    if response.status_code == 204 or not response.content:
        return None
    if is_json_type(response.headers.get("content-type", "")):
        try:
            return response.json()
        except ValueError:
            pass
    return response.text


def result_or_raise(call: Call, response: httpx.Response) -> Any:
    body = decode(response)
    if response.is_success or response.status_code in call.ok_statuses:
        return call.parse(body)
    raise errors.error_for(response.status_code, body,
                           retry_after=parse_retry_after(response.headers.get("Retry-After")))


def retry_wait(policy: RetryPolicy, attempt: int, response: httpx.Response | Exception) -> float | None:
    """Seconds to wait before the next attempt, or None to give up. Of the transport failures only
    those where the request never reached the server are retried (a write is never sent twice)."""
    if isinstance(response, Exception):
        sent = not isinstance(response, (httpx.ConnectError, httpx.ConnectTimeout))
        return None if sent else policy.wait(attempt, None)
    if response.status_code not in RETRY_STATUSES:
        return None
    return policy.wait(attempt, parse_retry_after(response.headers.get("Retry-After")))


def transport_error(exc: Exception) -> errors.NylonError:
    if isinstance(exc, httpx.TimeoutException):
        return errors.Timeout(f"timed out: {exc}")
    return errors.TransportError(f"{type(exc).__name__}: {exc}")


def _page(parse_item):
    def parse(body: dict) -> Page:
        nxt = body.get("next")
        cursor = httpx.URL(nxt).params.get("cursor") if nxt else None
        return Page(items=[parse_item(x) for x in body.get("results", [])], next_cursor=cursor, raw=body)

    return parse


def _clean(d: dict) -> dict:
    return {k: v for k, v in d.items() if v is not None}


def _jsonl_text(body: Any) -> str:
    """The export as text whatever the server labelled it: callers write it to a file or hand it
    to ``import_``, and a dict there would be written as its keys. An empty body is an empty
    export; a JSON document (a server answering ``application/json``) is put back as one line."""
    if body is None:
        return ""
    if isinstance(body, str):
        return body
    return json.dumps(body) + "\n"


def _context_or_none(body) -> Context | None:
    if not isinstance(body, dict) or "error" in body:
        return None  # 404: the server has no context endpoint
    return Context.from_json(body)


class Endpoints:
    """The API, written once. ``self._call(Call)`` is provided by the sync and async clients."""

    def _call(self, call: Call):  # pragma: no cover - implemented by the clients
        raise NotImplementedError

    # -- writes --------------------------------------------------------------------------------
    def weave(self, text: str, *, speaker: str = "", session_key: str = "", occurred_at=None,
              event_id: str = "", caption: str = "", metadata: dict | None = None,
              visibility: str | None = None, team_id: int | None = None):
        """Write one turn (a verbatim leaf). Returns a ``WeaveResult``. Sent again, it is written
        again unless it has an ``event_id`` (see ``weave_session``)."""
        body = Turn(text=text, speaker=speaker, occurred_at=occurred_at, event_id=event_id, caption=caption,
                    metadata=metadata or {}).to_json()
        if session_key:
            body["session_key"] = session_key
        body.update(_clean({"visibility": visibility, "team_id": team_id}))
        return self._call(Call("POST", f"{API}/memories/weave", json=body, parse=WeaveResult.from_json))

    def weave_session(self, session_key: str, turns: Iterable[Turn | str | dict], *, end_session: bool = False,
                      visibility: str | None = None, team_id: int | None = None):
        """Write a batch of turns of one session. Returns a ``WeaveResult`` (``created``: how many
        were new).

        Idempotent only per ``event_id``: a turn sent without one is written again each time it is
        sent, so a batch retried after an error whose outcome is unknown (a timeout, a lost answer)
        or a re-run import writes its turns twice. Give each turn a stable ``event_id`` (your own
        message id), or derive them with ``with_event_ids(session_key, turns)`` — over the whole
        input, before batching — as ``nylon weave`` does; sent again, the same event_id with the
        same text, speaker and session is a replay (200, nothing written), and with different ones,
        or naming another ``occurred_at``, ``visibility`` or ``team_id`` than was stored, a
        ``ConflictError`` (409 ``event_id_reused``) that writes nothing.

        A turn is a str, a ``Turn`` or a dict of its fields: ``text``, ``speaker``, ``occurred_at``,
        ``event_id``, ``caption``, ``metadata``, and ``visibility`` / ``team_id``, which the API takes
        for the whole request: a turn that names them is written with them when every turn of the
        call (and the ``visibility`` / ``team_id`` argument, if given) agrees, and otherwise nothing
        is sent (``TurnFieldError``, a ValueError naming the turn). Any other key is a
        ``TurnFieldError`` naming it, before anything is sent."""
        coerced = [Turn.coerce(t) for t in turns]
        scope = request_scope(coerced, visibility=visibility, team_id=team_id)
        body = {"session_key": session_key, "turns": [t.to_json() for t in coerced], "end_session": end_session}
        body.update(_clean(scope))
        return self._call(Call("POST", f"{API}/memories/weave-session", json=body, parse=WeaveResult.from_json))

    # -- reads ---------------------------------------------------------------------------------
    def resonate(self, query: str, *, k: int = 10, depth: int | None = None, reinforce: bool = True):
        """Retrieve memories for ``query``; every hit carries its explanation."""
        body = _clean({"query": query, "k": k, "depth": depth, "reinforce": reinforce})
        return self._call(Call("POST", f"{API}/memories/resonate", json=body, parse=ResonateResult.from_json))

    def context(self, query: str = "", *, k: int | None = None, reinforce: bool = True,
                budget: dict[str, int] | None = None):
        """The agent context (persona, scenario index, recall for ``query``, ``stable_hash``); None
        when the server does not offer ``/api/v1/context`` (an older server).

        ``budget``: character and item limits of its parts, whole numbers by name —
        ``max_chars_per_asset``, ``max_stable_chars``, ``max_index_entries``,
        ``max_chars_per_index_line``, ``max_chars_per_memory``, ``max_recall_chars``,
        ``max_recall_items`` (``{"max_recall_chars": 1000}``); the server caps each and refuses an
        unknown name (ValidationError). What a budget cut or left out is in ``truncated`` and
        ``dropped``."""
        body = _clean({"query": query or None, "k": k, "reinforce": reinforce,
                       "budget": dict(budget) if budget else None})
        return self._call(Call("POST", f"{API}/context", json=body, parse=_context_or_none,
                               ok_statuses=frozenset({404})))

    def get_node(self, node_id: int):
        return self._call(Call("GET", f"{API}/memories/nodes/{int(node_id)}", parse=Node.from_json))

    def list_nodes(self, *, kind: str | None = None, session_key: str | None = None, limit: int | None = None,
                   cursor: str | None = None):
        """One page of nodes (newest first); pass ``page.next_cursor`` for the next."""
        params = _clean({"kind": kind, "session_key": session_key, "limit": limit, "cursor": cursor})
        return self._call(Call("GET", f"{API}/memories/nodes", params=params, parse=_page(Node.from_json)))

    def delete_node(self, node_id: int):
        return self._call(Call("DELETE", f"{API}/memories/nodes/{int(node_id)}"))

    # -- governance ----------------------------------------------------------------------------
    def list_conflicts(self, *, status: str | None = None, limit: int | None = None, cursor: str | None = None):
        params = _clean({"status": status, "limit": limit, "cursor": cursor})
        return self._call(Call("GET", f"{API}/conflicts", params=params, parse=_page(Conflict.from_json)))

    def resolve_conflict(self, conflict_id: int, action: str, *, keep: int | None = None):
        """``action``: keep_both | supersede | reject; ``keep``: the node id to keep (supersede)."""
        body = _clean({"action": action, "keep": keep})
        return self._call(Call("POST", f"{API}/conflicts/{int(conflict_id)}/resolve", json=body,
                               parse=Conflict.from_json))

    def export(self):
        """The organisation's memory as JSONL text. Org admins only, so not with an agent key
        (PermissionDenied): a client built with ``api_key=None`` and the admin's console session
        cookie in ``headers``. Operators: ``manage.py export_memory``."""
        return self._call(Call("GET", f"{API}/export", parse=_jsonl_text))

    def import_(self, jsonl: str | Iterable[dict]):
        """Load an export (JSONL text, or an iterable of its records); returns the server's counts.
        Org admins only, as ``export`` (a session also needs its ``X-CSRFToken`` header);
        operators: ``manage.py import_memory``."""
        text = jsonl if isinstance(jsonl, str) else "\n".join(json.dumps(r) for r in jsonl)
        return self._call(Call("POST", f"{API}/import", json={"jsonl": text}))

    def proxy_stats(self):
        """Per-agent memory-proxy measurements (tokens injected, prefix stability, overhead)."""
        return self._call(Call("GET", f"{API}/proxy/stats"))

    def org(self):
        """``GET /api/v1/org``: the organisation and who the key is in it (``actor``: kind, label, role,
        scopes); an ``AuthError`` (401) for a key the server does not accept."""
        return self._call(Call("GET", f"{API}/org"))

    def health(self):
        """``/healthz``; a 503 (service down) is returned as a ``Health``, not raised."""
        return self._call(Call("GET", "/healthz", parse=Health.from_json, ok_statuses=frozenset({503})))


def client_headers(api_key: str | None, extra: dict | None) -> dict:
    headers = {"User-Agent": f"nylon-sdk-python/{__version__}", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    headers.update(extra or {})
    return headers


__all__ = ["Call", "Endpoints", "RetryPolicy", "Hit"]
