from __future__ import annotations

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def authors_from_labels(apps, schema_editor):
    """Earlier versions recorded only a label ("agent:<name>", "user:<name>"). The label names the
    agent of the org that bore the name then; an agent created after the version cannot be its
    author (a new agent given a former one's name), so such a match is left empty, which refuses
    it the author's writes rather than granting another's."""
    AssetVersion = apps.get_model("assets", "AssetVersion")
    Agent = apps.get_model("teams", "Agent")
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    agents = {(org_id, name): (pk, created) for pk, org_id, name, created
              in Agent.objects.values_list("id", "org_id", "name", "created_at")}
    users = dict(User.objects.values_list("username", "id"))
    rows = AssetVersion.objects.filter(author_agent__isnull=True, author_user__isnull=True)
    for pk, org_id, label, created in rows.values_list("id", "org_id", "author_label", "created_at").iterator():
        kind, _, name = label.partition(":")
        if kind == "agent" and (org_id, name) in agents:
            agent_id, agent_created = agents[(org_id, name)]
            if agent_created <= created:
                AssetVersion.objects.filter(pk=pk).update(author_agent_id=agent_id)
        elif kind == "user" and name in users:
            AssetVersion.objects.filter(pk=pk).update(author_user_id=users[name])


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
