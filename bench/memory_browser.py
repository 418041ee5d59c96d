"""The console's memory browser at scale: the time of its pages (newest first by when things
happened, keyset on ``occurred_at`` and id) with the ``node_org_occurred`` index and, in the same
run, without it (dropped inside a transaction that is rolled back: nothing changes).

    .venv/bin/python bench/resonate_scale.py --load-only          # the 100k-node org, once
    .venv/bin/python bench/memory_browser.py [--org scale-100k] [--pages 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "nylon_project.settings")

import _devdb  # noqa: E402  (bench/: Django set up, the dev database migrated)

_devdb.setup()

from django.db import connection, transaction  # noqa: E402

from frontend.selectors import NodeFilters, node_page  # noqa: E402
from memory.models import Node  # noqa: E402
from teams.auth import Actor  # noqa: E402
from teams.models import Membership, Organization  # noqa: E402


def pages(actor: Actor, n: int) -> tuple[float, float]:
    """Median ms of the first page (n times) and of n pages following one another."""
    first = []
    for _ in range(n):
        t = time.perf_counter()
        page = node_page(actor=actor, f=NodeFilters(), after=None)
        first.append((time.perf_counter() - t) * 1000)
    after, following = page.next_after, []
    for _ in range(n):
        t = time.perf_counter()
        page = node_page(actor=actor, f=NodeFilters(), after=after)
        following.append((time.perf_counter() - t) * 1000)
        after = page.next_after
    return statistics.median(first), statistics.median(following)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--org", default="scale-100k")
    ap.add_argument("--pages", type=int, default=7)
    args = ap.parse_args()
    org = Organization.objects.get(slug=args.org)
    print(f"org {org.slug}: {Node.objects.filter(org=org).count():,} nodes; load avg {os.getloadavg()[0]:.1f}")
    actors = {}
    for role in ("owner", "member"):
        m = Membership.objects.filter(org=org, role=role).select_related("user").first()
        if m is not None:
            actors[role] = Actor(org=org, user=m.user, role=m.role)
    for label, drop in (("with node_org_occurred", False), ("without it", True)):
        with transaction.atomic():
            if drop:
                with connection.cursor() as cur:
                    cur.execute("DROP INDEX node_org_occurred")
            for role, actor in actors.items():
                first, following = pages(actor, args.pages)
                print(f"  {label:24s} {role:6s} first page {first:7.1f} ms   following pages {following:7.1f} ms")
            transaction.set_rollback(True)  # the index stays


if __name__ == "__main__":
    main()
