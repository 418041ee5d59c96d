"""Bulk-ingest a JSON-lines file of sessions into an org, as one of its members or agents.

Each line is one weave-session body (``session_key``, ``turns``, ``visibility``, ``team_id``,
``end_session``), the same as ``POST /api/v1/memories/bulk`` takes. The whole file is checked first
(fields, teams, permissions of the writer), so a bad line writes nothing; then it is written in
chunks of about ``--chunk`` turns, each chunk one all-or-nothing ``bulk_ingest`` (a longer session
is split across chunks and continues where the last one stopped). Turns with an ``event_id`` make
a rerun idempotent: what was written is skipped.

    manage.py nylon_ingest sessions.jsonl --org acme --agent importer [--no-embed] [--enrich]
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

from django.core.management.base import BaseCommand, CommandError
from rest_framework.exceptions import ValidationError

from memory import services
from memory.apis import BulkSessionsField, bulk_sessions
from teams.auth import actor_for_agent, actor_for_user
from teams.models import Agent, Organization, Scope


def _chunks(path: str, size: int) -> Iterator[list[tuple[int, object]]]:
    """(line number, parsed line) lists of about ``size`` turns; a longer session is split."""
    chunk: list[tuple[int, object]] = []
    turns = 0
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except ValueError as exc:
                raise CommandError(f"line {n}: not JSON ({exc})") from None
            pieces = [raw]
            if isinstance(raw, dict) and isinstance(raw.get("turns"), list) and len(raw["turns"]) > size:
                all_turns, end = raw["turns"], raw.get("end_session", False)
                pieces = [{**raw, "turns": all_turns[i:i + size], "end_session": end and i + size >= len(all_turns)}
                          for i in range(0, len(all_turns), size)]
            for piece in pieces:
                count = len(piece["turns"]) if isinstance(piece, dict) and isinstance(piece.get("turns"), list) else 1
                if chunk and turns + count > size:
                    yield chunk
                    chunk, turns = [], 0
                chunk.append((n, piece))
                turns += count
    if chunk:
        yield chunk


class Command(BaseCommand):
    help = "Bulk-ingest a JSON-lines file of sessions (weave-session bodies) into an organisation."

    def add_arguments(self, parser):
        parser.add_argument("path", help="JSON-lines file, one session per line")
        parser.add_argument("--org", required=True, help="organisation slug")
        who = parser.add_mutually_exclusive_group(required=True)
        who.add_argument("--agent", help="write as this agent of the org (by name)")
        who.add_argument("--user", help="write as this member of the org (by username)")
        parser.add_argument("--no-embed", action="store_true",
                            help="write without vectors; the batches' background task embeds them")
        parser.add_argument("--enrich", action="store_true",
                            help="run each batch's deferred work (vectors, entity/similar edges) here, not in a worker")
        parser.add_argument("--chunk", type=int, default=5000, help="turns per transaction (default 5000)")

    def handle(self, *args, path: str, org: str, agent: str | None, user: str | None, no_embed: bool,
               enrich: bool, chunk: int, **options):
        o = Organization.objects.filter(slug=org).first()
        if o is None:
            raise CommandError(f"No organisation {org!r}.")
        if not 0 < chunk <= services.BULK_MAX_TURNS:
            raise CommandError(f"--chunk must be between 1 and {services.BULK_MAX_TURNS}.")
        if agent is not None:
            a = Agent.objects.filter(org=o, name=agent, is_active=True).first()
            if a is None:
                raise CommandError(f"No active agent {agent!r} in {org!r}.")
            actor = actor_for_agent(a, scopes=frozenset({Scope.READ, Scope.WRITE}))
        else:
            from django.contrib.auth import get_user_model

            u = get_user_model().objects.filter(username=user).first()
            actor = actor_for_user(u, o) if u is not None else None
            if actor is None:
                raise CommandError(f"{user!r} is not a member of {org!r}.")
        try:
            open(path, encoding="utf-8").close()
        except OSError as exc:
            raise CommandError(str(exc)) from None

        # Pass 1: the whole file, before anything is written.
        total_turns = lines = 0
        for part in _chunks(path, chunk):
            sessions = self._sessions(actor, part, check=True)
            total_turns += sum(len(s.turns) for s in sessions)
            lines = part[-1][0]
        # Pass 2: one transaction per chunk.
        t0 = time.perf_counter()
        created = existing = batches = 0
        for part in _chunks(path, chunk):
            result = services.bulk_ingest(actor=actor, sessions=self._sessions(actor, part), embed=not no_embed)
            created += result.created
            existing += result.existing
            if result.batch_id is not None:
                batches += 1
                if enrich:
                    services.enrich_batch(batch_id=result.batch_id)
            done = created + existing
            rate = done / max(time.perf_counter() - t0, 1e-9)
            self.stderr.write(f"{done}/{total_turns} turns ({created} new, {existing} already there), "
                              f"line {part[-1][0]}/{lines}, {rate:.0f} turns/s")
        seconds = time.perf_counter() - t0
        self.stdout.write(json.dumps({"lines": lines, "turns": total_turns, "created": created,
                                      "existing": existing, "batches": batches, "seconds": round(seconds, 2),
                                      "turns_per_s": round(total_turns / max(seconds, 1e-9), 1),
                                      "embedded": not no_embed, "enriched": enrich}))

    @staticmethod
    def _sessions(actor, part: list[tuple[int, object]], *, check: bool = False) -> list[services.SessionIn]:
        """Validated SessionIn of a chunk (``check``: also what bulk_ingest would refuse, such as a
        team the writer may not write to); errors name the file's line numbers."""
        try:
            sessions = bulk_sessions(actor, BulkSessionsField().to_internal_value([raw for _, raw in part]))
            if check:
                services.bulk_check(actor=actor, sessions=sessions)
            return sessions
        except ValidationError as exc:
            detail = exc.detail.get("sessions", exc.detail) if isinstance(exc.detail, dict) else exc.detail
            if isinstance(detail, dict):
                first = next(iter(detail))
                raise CommandError(f"line {part[int(first)][0]}: {json.dumps(detail[first])}") from None
            raise CommandError(f"lines {part[0][0]}-{part[-1][0]}: {detail}") from None
