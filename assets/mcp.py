"""MCP server (official ``mcp`` SDK): memory_weave, memory_resonate, memory_context, memory_get.

Authenticated with an agent key: on stdio the key given to ``manage.py mcp_stdio --key``; over
streamable HTTP (mounted at ``/mcp`` by ``nylon_project.asgi``) the request's
``Authorization: Bearer nyl_…`` (or ``X-Api-Key``) header, and a request without a valid key is
answered 401 before any MCP handling (``_RequireAgentKey``). Tools call the same services and
selectors as the REST API, so access rules, audit entries and budgets are identical.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, TypeVar

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError, InterfaceError, OperationalError, close_old_connections, connections
from django.http import Http404
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ConfigDict
from rest_framework.exceptions import APIException, Throttled, ValidationError

from nylon_project.parsers import unstorable_text
from teams.auth import Actor, ActorRateThrottle, authenticate_key, key_from_headers
from teams.models import Scope

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])

INSTRUCTIONS = ("Nylon team memory. Call memory_context once at the start of a task; then at most 3 "
                "memory calls per turn (memory_resonate / memory_get).")


class _Auth:
    stdio_key: str | None = None  # set by the mcp_stdio command


def _actor(ctx: Context | None, scope: str) -> Actor:
    raw = None
    request = None
    if ctx is not None:
        try:
            request = ctx.request_context.request
        except Exception:  # noqa: BLE001 - no request context (stdio)
            request = None
    if request is not None and getattr(request, "headers", None) is not None:
        raw = key_from_headers(request.headers)
    if raw is None:
        raw = _Auth.stdio_key
    actor = authenticate_key(raw) if raw else None
    if actor is None:
        raise ToolError("Invalid or missing agent key.")
    if not actor.can(scope):
        raise ToolError(f"This key lacks the '{scope}' scope.")
    throttled = rate_limited(actor)
    if throttled is not None:
        raise ToolError(f"Rate limited: this key is over its request rate; retry in {throttled.wait} s.")
    return actor


def rate_limited(actor: Actor) -> Throttled | None:
    """Count one request against the actor's per-key budget; None while within it, else DRF's
    Throttled (its ``wait``: whole seconds until the next request is allowed).

    The MCP tools and the memory proxy authenticate keys themselves, outside DRF's views, so they
    skipped REST's throttle entirely. This runs that same ``ActorRateThrottle`` (same
    ``DEFAULT_THROTTLE_RATES["actor"]`` rate, same cache key per key, same fail-open when Redis is
    down), so REST, MCP and the proxy draw on one budget per key. The throttle reads only
    ``request.actor`` for a key's actor; ``headers``/``META`` are there for its actor-less fallback."""
    throttle = ActorRateThrottle()
    request = SimpleNamespace(actor=actor, headers={}, META={})
    if throttle.allow_request(request, None):
        return None
    # wait() is None only when the history outgrew the rate (the rate was lowered): a full period then
    return Throttled(wait=throttle.wait() or throttle.duration)


def _detail(detail: Any) -> str:
    """A DRF error detail ({"text": ["Empty text."]}) as one line: "text: Empty text."."""
    if isinstance(detail, dict):
        return "; ".join(f"{k}: {_detail(v)}" for k, v in detail.items())
    if isinstance(detail, list):
        return " ".join(_detail(v) for v in detail)
    return str(detail)


def _check_storable(arguments: dict[str, Any]) -> None:
    # REST refuses these in its JSON parser (400) because Postgres text holds neither; the MCP SDK
    # parses its own JSON, so the same rule is applied here, before anything reaches SQL.
    for name, value in arguments.items():
        if isinstance(value, str) and unstorable_text(value):
            raise ToolError(f"{name}: NUL characters and unpaired surrogates are not allowed.")


def _tool_call(fn: F) -> F:
    """Every registered tool runs inside this: input checks, errors as ToolError, and the thread's
    database connections handed back when the call ends.

    The SDK runs a sync tool in an anyio worker thread, and Django keeps one connection per thread.
    REST requests give theirs back through the request_finished signal; nothing sends it here, so
    without the ``finally`` each worker thread kept its connection checked out of the psycopg pool
    (and for good once the idle thread exited), until every REST request waited the pool timeout
    and answered 503."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        close_old_connections()  # as request_started does: nothing stale from before this call
        try:
            _check_storable(kwargs)
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except Http404:
            raise ToolError("Not found.") from None
        except ValidationError as exc:
            raise ToolError(f"Invalid input: {_detail(exc.detail)}") from None
        except APIException as exc:
            raise ToolError(f"{exc.status_code}: {_detail(exc.detail)}") from None
        except DjangoValidationError as exc:
            raise ToolError(f"Invalid input: {_detail(getattr(exc, 'message_dict', exc.messages))}") from None
        except PermissionDenied:
            raise ToolError("Permission denied.") from None
        except (OperationalError, InterfaceError) as exc:
            # Pool timeout, Postgres restarting: retryable, as REST's 503 says.
            log.warning("mcp %s: database unavailable: %s", fn.__name__,
                        str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            raise ToolError("The database is unavailable or busy; retry shortly.") from None
        except DataError:
            # An input the checks above missed that Postgres still refused: the caller's to fix.
            log.warning("mcp %s: input refused by the database", fn.__name__, exc_info=True)
            raise ToolError("Invalid input: a value cannot be stored.") from None
        except Exception:
            # Logged in full here; the client gets no internals (query text, paths, values).
            log.exception("mcp %s failed", fn.__name__)
            raise ToolError("Internal error; it has been logged.") from None
        finally:
            try:
                connections.close_all()  # back to the pool, success or error
            except Exception:  # noqa: BLE001 - a failed close must not replace the call's outcome
                log.warning("mcp %s: closing the database connection failed", fn.__name__, exc_info=True)

    return run  # type: ignore[return-value]


def tool_weave(actor: Actor, *, text: str, visibility: str = "", session_key: str = "",
               speaker: str = "", event_id: str = "", occurred_at: str = "", team_id: int | None = None) -> dict:
    """``visibility`` empty: the agent's default_visibility (its team for an agent made in a team).
    ``event_id`` makes a retried call a replay (created 0) instead of a second memory, as in REST.
    ``occurred_at`` (ISO 8601, empty: now) dates a backfill; ``team_id`` names the team of a team
    memory (an agent writes only to its own team)."""
    from memory import services
    from memory.apis import WeaveApi
    from nylon_project.api import team_from_input

    # REST weave's own serializer, so both paths accept the same input (text non-empty and at most
    # 20,000 characters, speaker and session_key at most 200, a write visibility, no NUL); the
    # wrapper of every tool (_tool_call) has already refused unstorable text (unpaired surrogates).
    s = WeaveApi.InputSerializer(data={"text": text, "session_key": session_key, "speaker": speaker,
                                       "event_id": event_id, **({"visibility": visibility} if visibility else {}),
                                       **({"occurred_at": occurred_at} if occurred_at else {}),
                                       **({"team_id": team_id} if team_id is not None else {})})
    if not s.is_valid():
        raise ToolError(f"Invalid input: {_detail(s.errors)}")
    d = s.validated_data
    try:
        r = services.weave_session(actor=actor, session_key=d["session_key"], visibility=d["visibility"],
                                   team=team_from_input(actor, d["team_id"]),
                                   turns=[services.TurnIn(text=d["text"], speaker=d["speaker"], event_id=d["event_id"],
                                                          occurred_at=d["occurred_at"])])
    except services.ChangedReplay as exc:
        raise ToolError(exc.message) from None
    return {"node_ids": r.node_ids, "created": r.created, "embedded": r.embedded}


MCP_MAX_K = 20  # hits a model reads in one tool answer
MAX_QUERY_CHARS = 4000  # as REST's query field


def _check_query(query: str) -> None:
    """A query longer than REST's limit is refused as REST refuses it: it was cut silently, and a
    1.4 MB one was read whole before being cut."""
    if len(query) > MAX_QUERY_CHARS:
        raise ToolError(f"Invalid input: query: at most {MAX_QUERY_CHARS} characters (got {len(query)}).")


def tool_resonate(actor: Actor, *, query: str, k: int = 5) -> dict:
    from memory import services

    from .context import matched_ids, recall_for

    if not 1 <= int(k) <= MCP_MAX_K:  # as REST refuses an out-of-range k, not a silent clamp
        raise ToolError(f"Invalid input: k: between 1 and {MCP_MAX_K}.")
    k = int(k)
    # As the context's recall (the model reads these hits directly): each with when it happened and
    # who said it, whether it matches the query, the same statement once (``folded``) and a model's
    # written-back answers below the memories they restate.
    _check_query(query)
    found = recall_for(actor=actor, query=query, k=k)
    hits = [h.as_item() for h in found.hits[:k]]
    if recalled := matched_ids(hits):
        services.record_recall(node_ids=recalled)
    return {"hits": hits, "no_match": found.no_match(hits),
            "degraded": [] if found.outcome.vector_used else ["embedder"]}


# What a model reading the tool's answer needs: the context text (persona, index, recall lines with
# their dates, speakers and disputes) and the flags about it. The REST bundle also has the text in two
# halves, every recalled item as JSON and the budget it was built with: three times the tokens.
MCP_CONTEXT_KEYS = ("context", "stable_hash", "no_match", "degraded", "degraded_reasons", "truncated", "dropped",
                    "memory_call_budget", "language")


def tool_context(actor: Actor, *, query: str = "", language: str = "en") -> dict:
    from .context import build_context, pick_language

    _check_query(query)
    bundle = build_context(actor=actor, query=query, language=pick_language(language)).as_dict()
    return {k: bundle[k] for k in MCP_CONTEXT_KEYS}


NODE_TYPES = ("memory", "node")


def tool_get(actor: Actor, *, type: str, id: int) -> dict:  # noqa: A002 - the tool's argument names
    from memory.apis import NodeOutput

    from . import access
    from .apis import AssetOutput

    # The context names recalled nodes "[memory N]" and its guide tells the model to pass "memory";
    # "node" (the REST name, and the proxy's tool schema) stays accepted.
    if type in NODE_TYPES:
        return dict(NodeOutput(access.access_node(actor, int(id), for_write=False, request_id="mcp")).data)
    if type == "asset":
        asset = access.access_asset_by_id(actor, int(id), for_write=False, request_id="mcp")
        if actor.agent is not None and not access._owns(actor, asset):
            # What the context's [asset N] entry stands for: the approved version, never a newer
            # one awaiting review (an agent reads a bound asset here in full).
            from .selectors import with_served_content

            served = with_served_content([asset])
            if not served:
                raise ToolError(f"Asset {id} has no approved version: only approved versions are served.")
            asset = served[0]
        return dict(AssetOutput(asset, context={"for_agent": actor.agent is not None}).data)
    raise ToolError("type is 'memory' (or 'node') for a [memory N] line, or 'asset' for an [asset N] entry.")


class _Server(MCPServer):
    """Every tool registered on it, however (``tool()`` or ``add_tool()``), runs in ``_tool_call``."""

    def add_tool(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        if inspect.iscoroutinefunction(fn):
            # _tool_call is sync: the SDK would no longer await the coroutine, and an async tool's
            # ORM calls would run on the event loop's thread, not the worker thread it cleans up.
            raise TypeError(f"MCP tools are sync functions: {fn.__name__}")
        super().add_tool(_tool_call(fn), *args, **kwargs)
        tool = self._tool_manager.get_tool(kwargs.get("name") or fn.__name__)
        if tool is not None:
            # An argument the tool does not take is an error, as REST's "Unknown field.": the SDK drops
            # it, and memory_weave(occurred_at=...) answered success with the memory dated now.
            base = tool.fn_metadata.arg_model
            tool.fn_metadata.arg_model = type(base.__name__, (base,), {
                "model_config": ConfigDict(**base.model_config, extra="forbid")})
            tool.parameters["additionalProperties"] = False


def build_server() -> MCPServer:
    server = _Server(name="nylon", instructions=INSTRUCTIONS)

    @server.tool(description="Save a memory (a fact, decision or result). visibility: private, team, org or "
                             "restricted; left out, the agent's default (set by an admin; its team for an agent in a "
                             "team). event_id: a key of your own for this memory, so that a retried call stores it "
                             "once (created 0 on a replay). occurred_at: when it happened (ISO 8601; left out, now). "
                             "team_id: the team of a team memory (the agent's own).")
    def memory_weave(text: str, ctx: Context, visibility: str = "", session_key: str = "",
                     speaker: str = "", event_id: str = "", occurred_at: str = "",
                     team_id: int | None = None) -> dict[str, Any]:
        actor = _actor(ctx, Scope.WRITE)
        return tool_weave(actor, text=text, visibility=visibility, session_key=session_key, speaker=speaker,
                          event_id=event_id, occurred_at=occurred_at, team_id=team_id)

    @server.tool(description="Search the team memory visible to this agent (k: 1 to 20 hits).")
    def memory_resonate(query: str, ctx: Context, k: int = 5) -> dict[str, Any]:
        actor = _actor(ctx, Scope.READ)
        return tool_resonate(actor, query=query, k=k)

    @server.tool(description="The agent's context as text (persona in full, scenario index, then recall for a "
                             "query) with its flags (no_match, degraded, truncated).")
    def memory_context(ctx: Context, query: str = "", language: str = "en") -> dict[str, Any]:
        actor = _actor(ctx, Scope.READ)
        return tool_context(actor, query=query, language=language)

    @server.tool(description="Read one item in full: type='memory' (or 'node') with the N of a [memory N] line "
                             "or a hit's node_id, type='asset' with the N of an [asset N] index entry.")
    def memory_get(type: str, id: int, ctx: Context) -> dict[str, Any]:  # noqa: A002
        actor = _actor(ctx, Scope.READ)
        return tool_get(actor, type=type, id=id)

    return server


_http_server: MCPServer | None = None


def _key_status(raw: str | None) -> int:
    """200 for a valid agent key, 401 for none or a bad one, 503 when the database cannot say.
    Runs in a worker thread, handing its connection back as the tools do (see ``_tool_call``)."""
    if not raw:
        return 401
    close_old_connections()
    try:
        return 200 if authenticate_key(raw) is not None else 401
    except (OperationalError, InterfaceError):
        return 503
    finally:
        try:
            connections.close_all()
        except Exception:  # noqa: BLE001 - the answer stands whatever the close does
            log.warning("mcp: closing the database connection failed", exc_info=True)


class _RequireAgentKey:
    """Every HTTP request to ``/mcp`` needs a valid agent key, else 401 before any MCP handling.

    The tools check the key themselves (stdio has no request), but over HTTP that meant initialize
    and tools/list answered 200 to anyone and tools/call a 200 whose result was an error: an MCP
    client could not tell that its key was wrong, nor ask for a new one (it looks for 401 and
    ``WWW-Authenticate``). Scope and rate-limit refusals stay tool errors: the key is valid."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        import anyio
        from starlette.datastructures import Headers
        from starlette.responses import JSONResponse

        from nylon_project.errors import error_body
        from nylon_project.middleware import request_id_for

        headers = Headers(scope=scope)
        raw = key_from_headers(headers)
        status = await anyio.to_thread.run_sync(_key_status, raw)
        if status == 200:
            return await self.app(scope, receive, send)
        rid = request_id_for(headers.get("x-request-id", ""))
        if status == 401:
            # REST's two codes: no credentials at all, or credentials that are not a live key
            body = (error_body("authentication_failed", "Invalid or revoked agent key.", request_id=rid) if raw
                    else error_body("not_authenticated", "Send your agent key as 'Authorization: Bearer nyl_…' "
                                    "(or X-Api-Key).", request_id=rid))
            extra = {"WWW-Authenticate": 'Bearer realm="nylon"'}
        else:
            body = error_body("unavailable", "The database is unavailable or busy; retry shortly.",
                              request_id=rid)
            extra = {"Retry-After": "1"}
        response = JSONResponse(body, status_code=status, headers={"X-Request-Id": rid, **extra})
        await response(scope, receive, send)


def http_app():
    """The streamable-HTTP ASGI app (path ``/mcp``); its lifespan runs the session manager."""
    global _http_server
    if _http_server is None:
        _http_server = build_server()
    return _RequireAgentKey(_http_server.streamable_http_app(streamable_http_path="/mcp", stateless_http=True,
                                                             json_response=True))
