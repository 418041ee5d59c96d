from __future__ import annotations

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def authors_from_labels(apps, schema_editor):
    """Earlier versions recorded only a label ("agent:<name>", "user:<username>"). The label names the
    agent of the version's org that bore the name then; an agent created after the version cannot be
    its author (a new agent given a former one's name), so such a match is left empty, which refuses
    it the author's writes rather than granting another's. A person is looked for among the members
    of the version's org only: a username is global, and a renamed member's old name may since be
    someone's of another org.

    Two set-based statements, not one per row: this runs in the migration's transaction, after
    AddField took an ACCESS EXCLUSIVE lock on the version table and the foreign keys locked the agent
    and user tables against writes (a console login updates last_login), all held until it commits.
    Agent names are unique in an org; were several to match, the latest created not after the
    version is taken, then the highest id."""
    q = schema_editor.quote_name
    version = q(apps.get_model("assets", "AssetVersion")._meta.db_table)
    agent = q(apps.get_model("teams", "Agent")._meta.db_table)
    membership = q(apps.get_model("teams", "Membership")._meta.db_table)
    user = q(apps.get_model(*settings.AUTH_USER_MODEL.split("."))._meta.db_table)
    with schema_editor.connection.cursor() as cur:
        cur.execute(f"""
            UPDATE {version} AS v SET author_agent_id = m.agent_id
            FROM (SELECT DISTINCT ON (v2.id) v2.id AS version_id, a.id AS agent_id
                  FROM {version} AS v2
                  JOIN {agent} AS a ON a.org_id = v2.org_id AND a.name = substr(v2.author_label, 7)
                                   AND a.created_at <= v2.created_at
                  WHERE left(v2.author_label, 6) = 'agent:'
                    AND v2.author_agent_id IS NULL AND v2.author_user_id IS NULL
                  ORDER BY v2.id, a.created_at DESC, a.id DESC) AS m
            WHERE v.id = m.version_id""")
        cur.execute(f"""
            UPDATE {version} AS v SET author_user_id = u.id
            FROM {membership} AS m JOIN {user} AS u ON u.id = m.user_id
            WHERE m.org_id = v.org_id AND left(v.author_label, 5) = 'user:'
              AND u.username = substr(v.author_label, 6)
              AND v.author_agent_id IS NULL AND v.author_user_id IS NULL""")


class Migration(migrations.Migration):

    dependencies = [
        ("assets", "0005_assetversion_approved_at"),
        ("teams", "0003_agent_default_visibility"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="assetversion",
            name="author_agent",
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                    related_name="+", to="teams.agent"),
        ),
        migrations.AddField(
            model_name="assetversion",
            name="author_user",
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                    related_name="+", to=settings.AUTH_USER_MODEL),
        ),
        migrations.RunPython(authors_from_labels, migrations.RunPython.noop),
    ]
