"""Django for the bench scripts that measure in the dev database (the embedded Postgres under
``.nylon/`` unless ``DATABASE_URL`` names another): set up, then the schema brought up to date as
``make run`` does, so a fresh clone runs them without a ``make run`` first (they failed on a
missing ``teams_organization`` table)."""

from __future__ import annotations

import django


def setup() -> None:
    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
