"""Serve the Nylon MCP tools over stdio, authenticated with one agent key."""

from __future__ import annotations

import os

import anyio
from django.core.management.base import BaseCommand, CommandError

from teams.auth import authenticate_key


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
        anyio.run(build_server().run_stdio_async)
