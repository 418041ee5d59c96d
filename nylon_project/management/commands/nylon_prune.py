"""Delete rows past their retention age now (what the beat's daily ``nylon_project.retention``
run does), or with ``--dry-run`` count them; prints one line per table."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from nylon_project.retention import prune


class Command(BaseCommand):
    help = "Delete audit events, finished bulk batches, LLM usage, resolved conflicts and expired sessions " \
           "past their retention (NYLON_*_RETENTION_DAYS); --dry-run only counts them."

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="count what would be deleted, delete nothing")
        parser.add_argument("--max-secs", type=float, default=None,
                            help="stop after about this many seconds (default: until nothing is due)")

    def handle(self, *args, dry_run: bool, max_secs: float | None, **options):
        run = prune(dry_run=dry_run, budget_secs=max_secs)
        verb = "would delete" if dry_run else "deleted"
        self.stdout.write(f"{'table':<16}{'keep':<16}{verb:>14}")
        for t in run.tables:
            count = "failed" if t.exc else "-" if t.deleted is None else str(t.deleted)
            note = f"  {t.error}" if t.error else "  (more due: time limit reached)" if not t.complete else ""
            self.stdout.write(f"{t.table:<16}{t.keep:<16}{count:>14}{note}")
        self.stdout.write(f"{'total':<32}{run.deleted:>14}  in {run.secs:.1f}s"
                          + ("  (dry run: nothing deleted)" if dry_run else ""))
        if run.failed:
            raise CommandError("retention failed for " + ", ".join(t.table for t in run.failed) + " (see above)")
