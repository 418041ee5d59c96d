"""MCP server (official ``mcp`` SDK): memory_weave, memory_resonate, memory_context, memory_get.

Authenticated with an agent key: on stdio the key given to ``manage.py mcp_stdio --key``; over
streamable HTTP (mounted at ``/mcp`` by ``nylon_project.asgi``) the request's
``Authorization: Bearer nyl_…`` (or ``X-Api-Key``) header. Tools call the same services and
selectors as the REST API, so access rules, audit entries and budgets are identical.
"""

from __future__ import annotations

from typing import Any

from django.db import close_old_connections
from django.http import Http404
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from rest_framework.exceptions import APIException

from teams.auth import Actor, authenticate_key, key_from_headers
from teams.models import Scope

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
    close_old_connections()
    actor = authenticate_key(raw) if raw else None
    if actor is None:
        raise ToolError("Invalid or missing agent key.")
    if not actor.can(scope):
        raise ToolError(f"This key lacks the '{scope}' scope.")
    return actor


def _call(fn):
    try:
        return fn()
    except Http404:
        raise ToolError("Not found.") from None
    except APIException as exc:
        raise ToolError(f"{exc.status_code}: {exc.detail}") from None


def tool_weave(actor: Actor, *, text: str, visibility: str = "private", session_key: str = "",
               speaker: str = "") -> dict:
    from memory import services
    from memory.apis import WRITE_VISIBILITIES

    if visibility not in WRITE_VISIBILITIES:
        raise ToolError(f"visibility must be one of {list(map(str, WRITE_VISIBILITIES))}.")
    if not text.strip() or len(text) > services.MAX_TEXT_CHARS:
        raise ToolError("text must be non-empty and at most 20000 characters.")
    r = services.weave_session(actor=actor, turns=[services.TurnIn(text=text, speaker=speaker[:200])],
                               session_key=session_key[:200], visibility=visibility)
    return {"node_ids": r.node_ids, "created": r.created, "embedded": r.embedded}


def tool_resonate(actor: Actor, *, query: str, k: int = 5) -> dict:
    from memory import selectors, services

    out = selectors.resonate_for(actor=actor, query=query[:4000], k=max(1, min(int(k), 20)))
    hits = [{"node_id": h.node_id, "score": round(h.score, 6), "text": h.text} for h in out.result.hits]
    services.record_recall(node_ids=[h["node_id"] for h in hits])
    return {"hits": hits, "degraded": [] if out.vector_used else ["embedder"]}


def tool_context(actor: Actor, *, query: str = "", language: str = "en") -> dict:
    from .context import build_context, pick_language

    return build_context(actor=actor, query=query[:4000], language=pick_language(language)).as_dict()


def tool_get(actor: Actor, *, type: str, id: int) -> dict:  # noqa: A002 - the tool's argument names
    from memory.apis import NodeOutput

    from . import access
    from .apis import AssetOutput

    if type == "node":
        return dict(NodeOutput(access.access_node(actor, int(id), for_write=False, request_id="mcp")).data)
    if type == "asset":
        return dict(AssetOutput(access.access_asset_by_id(actor, int(id), for_write=False,
                                                          request_id="mcp")).data)
    raise ToolError("type is 'node' or 'asset'.")


def build_server() -> MCPServer:
    server = MCPServer(name="nylon", instructions=INSTRUCTIONS)

    @server.tool(description="Save a memory (a fact, decision or result) for this agent.")
    def memory_weave(text: str, ctx: Context, visibility: str = "private", session_key: str = "",
                     speaker: str = "") -> dict[str, Any]:
        actor = _actor(ctx, Scope.WRITE)
        return _call(lambda: tool_weave(actor, text=text, visibility=visibility, session_key=session_key,
                                        speaker=speaker))

    @server.tool(description="Search the team memory visible to this agent.")
    def memory_resonate(query: str, ctx: Context, k: int = 5) -> dict[str, Any]:
        actor = _actor(ctx, Scope.READ)
        return _call(lambda: tool_resonate(actor, query=query, k=k))

    @server.tool(description="The agent's context: persona in full, scenario index, then recall for a query.")
    def memory_context(ctx: Context, query: str = "", language: str = "en") -> dict[str, Any]:
        actor = _actor(ctx, Scope.READ)
        return _call(lambda: tool_context(actor, query=query, language=language))

    @server.tool(description="Read one memory node (type='node') or asset (type='asset') in full.")
    def memory_get(type: str, id: int, ctx: Context) -> dict[str, Any]:  # noqa: A002
        actor = _actor(ctx, Scope.READ)
        return _call(lambda: tool_get(actor, type=type, id=id))

    return server


_http_server: MCPServer | None = None


def http_app():
    """The streamable-HTTP ASGI app (path ``/mcp``); its lifespan runs the session manager."""
    global _http_server
    if _http_server is None:
        _http_server = build_server()
    return _http_server.streamable_http_app(streamable_http_path="/mcp", stateless_http=True,
                                            json_response=True)
