"""API fuzzing: schemathesis generates requests from Nylon's own OpenAPI schema and every response
is checked (no server error; status code, content type, headers and body as documented; invalid
input refused with a 4xx).

Creates a scratch database in the (embedded) Postgres and migrates it, starts a real uvicorn
process on it with a fresh org and agent key, writes a little memory and an asset through the API
so real ids exist, then fuzzes every operation under /api/v1/ in positive and negative mode: first
with the agent key, then with the org owner's console session (admin-only operations get past
the 403). The scratch database is dropped afterwards. Exits 1 on any failure.

    .venv/bin/python bench/fuzz_api.py [--cases 1500] [--owner-cases 1000] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "nylon_project.settings")

import django  # noqa: E402
import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402

from nylon_project import embedded  # noqa: E402

ORG = "bench-fuzz"
ADMIN_URL = embedded.database_url()  # attaches to (or starts) the embedded Postgres
SCRATCH = f"nylon_fuzz_{os.getpid()}"


def _admin(statement: sql.Composable) -> None:
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(statement)


_admin(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(SCRATCH)))
os.environ["DATABASE_URL"] = embedded.url_with_database(ADMIN_URL, SCRATCH)
django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connections  # noqa: E402

from nylon_project.live import start_live_server  # noqa: E402
from tests.nylon_project.fuzz import Credentials, prepare_org, run_fuzz, seed_via_api, server_errors  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1500, help="cases with the agent key")
    parser.add_argument("--owner-cases", type=int, default=1000,
                        help="then cases with the org owner's console session (0: none)")
    parser.add_argument("--seed", type=int, default=0, help="Hypothesis seed (same seed, same cases)")
    args = parser.parse_args()
    server = None
    reports = []
    try:
        call_command("migrate", verbosity=0)
        org = prepare_org(ORG)
        server = start_live_server(NYLON_RATE_LIMIT="1000000/min", NYLON_ENQUEUE_TASKS="0")
        seed_via_api(server.url, org)
        reports.append(run_fuzz(server.url, Credentials.agent_key(org.key), cases=args.cases, path_ids=org.ids,
                                seed_value=args.seed))
        if args.owner_cases:
            # last: the owner may deactivate the agent, revoke its key or delete the team
            reports.append(run_fuzz(server.url, Credentials.console_session(org.owner), cases=args.owner_cases,
                                    path_ids=org.ids, seed_value=args.seed, protect={"user_id": [org.owner.id]}))
    finally:
        if server is not None:
            server.stop()
        connections.close_all()
        _admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(SCRATCH)))
    failed = False
    for report in reports:
        print(report.summary() + "\n")
        failed |= bool(report.server_errors or report.schema_violations or report.errors)
    for trace in server_errors(server.log()):
        print("--- server traceback\n" + trace)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
