"""Serve the Nylon MCP tools over stdio, authenticated with one agent key."""

from __future__ import annotations

import os

import anyio
from django.core.management.base import BaseCommand, CommandError

from teams.auth import authenticate_key


class _Pending:
    """The ids of the client's requests not answered yet, and a way to wait until there are none."""

    def __init__(self) -> None:
        self.ids: set = set()
        self.server_done = False
        self._changed = anyio.Event()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def add(self, request_id) -> None:
        self.ids.add(request_id)

    def answered(self, request_id) -> None:
        self.ids.discard(request_id)
        self._notify()

    def finished(self) -> None:
        self.server_done = True
        self._notify()

    async def drained(self) -> None:
        while self.ids and not self.server_done:
            await self._changed.wait()


async def serve_stdio(server) -> None:
    """``server.run_stdio_async`` with one difference: end of input waits for the answers.

    The SDK closes the server's input as soon as stdin ends, and the server then cancels the
    requests still running: a client that pipes its requests and closes stdin (``cmd < requests``)
    got only the replies that were quick enough, although the tools it called had run (a
    memory_weave was written and its answer lost). Here end of input reaches the server only once
    every request read so far has been answered."""
    # create_context_streams is the SDK's own stream type (its stdio_server uses it) in a private
    # module: mcp is pinned in pyproject.toml, and tests/assets/test_mcp_stdio_eof.py fails if an
    # upgrade moves it.
    from mcp.server.stdio import stdio_server
    from mcp.shared._context_streams import create_context_streams
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCError, JSONRPCRequest, JSONRPCResponse

    lowlevel = server._lowlevel_server
    pending = _Pending()
    async with stdio_server() as (wire_in, wire_out):
        to_server, server_in = create_context_streams[SessionMessage | Exception](0)
        server_out, from_server = create_context_streams[SessionMessage](0)

        async def read() -> None:
            async with to_server:
                async for item in wire_in:
                    if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCRequest):
                        pending.add(item.message.id)
                    await to_server.send(item)
                await pending.drained()

        async def write() -> None:
            async with wire_out, from_server:
                async for item in from_server:
                    await wire_out.send(item)
                    if isinstance(item.message, JSONRPCResponse | JSONRPCError):
                        pending.answered(item.message.id)

        async def run() -> None:
            try:
                await lowlevel.run(server_in, server_out, lowlevel.create_initialization_options())
            finally:
                pending.finished()

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            tg.start_soon(write)
            tg.start_soon(run)


class Command(BaseCommand):
    help = "Run the MCP server (memory_weave, memory_resonate, memory_context, memory_get) on stdio."

    def add_arguments(self, parser):
        parser.add_argument("--key", default=os.environ.get("NYLON_AGENT_KEY", ""),
                            help="agent API key (or NYLON_AGENT_KEY)")

    def handle(self, *args, key: str, **options):
        from assets.mcp import _Auth, build_server

        if not key or authenticate_key(key) is None:
            raise CommandError("A valid agent key is required (--key or NYLON_AGENT_KEY).")
        _Auth.stdio_key = key
        anyio.run(serve_stdio, build_server())
