from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # Built without locking out writes: memory_node is the largest table (100k rows: a few seconds).
    atomic = False

    dependencies = [
        ("memory", "0007_tick_session_indexes"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="node",
            index=models.Index(fields=["org", "-occurred_at", "-id"], name="node_org_occurred"),
        ),
    ]
