"""Import a JSONL memory export into an org (ids remapped, owners matched by name)."""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandError

from assets.porting import import_lines
from teams.models import Organization


class Command(BaseCommand):
    help = "Import a JSONL memory export into an organisation."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="target organisation slug")
        parser.add_argument("path", help="JSONL file ('-' for stdin)")

    def handle(self, *args, org: str, path: str, **options):
        o = Organization.objects.filter(slug=org).first()
        if o is None:
            raise CommandError(f"No organisation {org!r}.")
        fh = sys.stdin if path == "-" else open(path, encoding="utf-8")
        try:
            counts = import_lines(o, fh)
        except (ValueError, json.JSONDecodeError) as exc:
            raise CommandError(str(exc)) from None
        finally:
            if fh is not sys.stdin:
                fh.close()
        self.stdout.write(json.dumps(counts))
        if counts.get("unowned"):
            # Rows go to owners matched by name: members, agents and teams are not in the file.
            self.stderr.write(self.style.WARNING(
                f"{counts['unowned']} rows were skipped: their owners or teams do not exist in {org!r} "
                f"({', '.join(counts['missing'])}). Create them (same names), then import again: rows "
                "already imported are skipped. To move a whole instance, back up its database instead "
                "(README, Backups)."))
