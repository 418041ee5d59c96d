"""Export an org's memory (nodes, edges, assets, versions) as JSONL (operator: everything)."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError

from assets.porting import export_lines
from teams.models import Organization


class Command(BaseCommand):
    help = "Export an organisation's memory as JSONL."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="organisation slug")
        parser.add_argument("--out", default="-", help="output file (default: stdout)")

    def handle(self, *args, org: str, out: str, **options):
        o = Organization.objects.filter(slug=org).first()
        if o is None:
            raise CommandError(f"No organisation {org!r}.")
        fh = sys.stdout if out == "-" else open(out, "w", encoding="utf-8")
        try:
            n = 0
            for line in export_lines(o):
                fh.write(line + "\n")
                n += 1
        finally:
            if fh is not sys.stdout:
                fh.close()
        self.stderr.write(f"exported {n} lines from {org}")
