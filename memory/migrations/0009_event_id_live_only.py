"""An event id dedupes against the writer's live memories only: ``node_event_idempotent`` becomes
partial (``AND deleted_at IS NULL``). A memory deleted and then written again with the same event id
(``nylon weave`` of the same file again, a client re-sending a turn) used to answer the deleted node's id, 200 and
nothing written; it is now a new memory.

Swapped without locking out writes (memory_node is the largest table): the new index is built
concurrently under another name, then one short transaction drops the old one and renames the new
one, so the constraint keeps the name the weave's retry on a concurrent replay looks for
(``services.weave_session``). That transaction waits at most 5 s for its lock rather than queue every
writer behind a long reader; a failed run leaves the old index in place and is simply run again."""

from __future__ import annotations

from django.db import migrations, models, transaction

COLUMNS = "(org_id, owner_user_id, owner_agent_id, event_id) NULLS NOT DISTINCT"
LIVE = f"{COLUMNS} WHERE NOT (event_id = '') AND deleted_at IS NULL"
ALL = f"{COLUMNS} WHERE NOT (event_id = '')"  # 0002's


def _swap(schema_editor, where: str) -> None:
    conn = schema_editor.connection
    with conn.cursor() as cur:
        # A build interrupted earlier leaves an invalid index under the temporary name: rebuilt.
        cur.execute("DROP INDEX CONCURRENTLY IF EXISTS node_event_idempotent_new")
        cur.execute(f"CREATE UNIQUE INDEX CONCURRENTLY node_event_idempotent_new ON memory_node {where}")
    with transaction.atomic(using=conn.alias), conn.cursor() as cur:
        cur.execute("SET LOCAL lock_timeout = '5s'")
        cur.execute("DROP INDEX IF EXISTS node_event_idempotent")
        cur.execute("ALTER INDEX node_event_idempotent_new RENAME TO node_event_idempotent")


def forwards(apps, schema_editor) -> None:
    _swap(schema_editor, LIVE)


def backwards(apps, schema_editor) -> None:
    # Fails (a unique violation) once a deleted memory's event id was written again: both rows are
    # then the writer's, and the old index cannot hold them.
    _swap(schema_editor, ALL)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("memory", "0008_node_org_occurred"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(forwards, backwards)],
            state_operations=[
                migrations.RemoveConstraint(model_name="node", name="node_event_idempotent"),
                migrations.AddConstraint(
                    model_name="node",
                    constraint=models.UniqueConstraint(
                        condition=models.Q(models.Q(("event_id", ""), _negated=True), ("deleted_at__isnull", True)),
                        fields=("org", "owner_user", "owner_agent", "event_id"), name="node_event_idempotent",
                        nulls_distinct=False),
                ),
            ],
        ),
    ]
