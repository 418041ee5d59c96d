"""Indexes the retention deletes read through (nylon_project/retention.py), so a daily chunk is an
index range scan, not a sequential scan of the table: ``LlmUsage.day`` (its unique constraint
leads with the org) and ``Conflict.resolved_at``.

Raw SQL on purpose, outside the migration state: declaring them in the models' Meta is for the
owner of reflection/models.py; without that Meta entry, state-tracked AddIndex operations would
make the next ``makemigrations`` generate their removal. Whoever moves them into Meta should do it
with ``SeparateDatabaseAndState`` (state only) and the same names. CONCURRENTLY, so building them
on a large table does not block writers (hence not atomic)."""

from django.db import migrations


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("reflection", "0001_initial"),
    ]

    operations = [
        migrations.RunSQL(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS llm_usage_day ON reflection_llmusage (day)",
            "DROP INDEX CONCURRENTLY IF EXISTS llm_usage_day",
        ),
        migrations.RunSQL(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS conflict_resolved_at ON reflection_conflict (resolved_at)",
            "DROP INDEX CONCURRENTLY IF EXISTS conflict_resolved_at",
        ),
    ]
