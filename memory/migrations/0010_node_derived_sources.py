"""What was drawn from a node (facts, bridges, by ``source_node_ids``), found through an index: a
delete deletes the derivations it leaves without a live source (``services.node_delete``), and
without it each delete read every node of the org. Partial (nodes with sources only), so writes of
leaves never touch it; built concurrently, as 0008."""

from __future__ import annotations

import django.contrib.postgres.indexes
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("memory", "0009_event_id_live_only"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="node",
            index=django.contrib.postgres.indexes.GinIndex(
                condition=models.Q(("source_node_ids__len__gt", 0)), fields=["source_node_ids"],
                name="node_derived_sources"),
        ),
    ]
