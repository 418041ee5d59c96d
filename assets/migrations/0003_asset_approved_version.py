from django.db import migrations, models


def approved_is_current(apps, schema_editor):
    # Before this column the served content was the current one of every approved asset, so that is
    # what was approved as far as anyone can tell now; deprecated and archived ones keep it too.
    Asset = apps.get_model("assets", "Asset")
    Asset.objects.filter(status__in=["approved", "deprecated", "archived"]).update(
        approved_version=models.F("version"))


class Migration(migrations.Migration):

    dependencies = [
        ("assets", "0002_governance"),
    ]

    operations = [
        migrations.AddField(
            model_name="asset",
            name="approved_version",
            field=models.IntegerField(blank=True, null=True),
        ),
        migrations.RunPython(approved_is_current, migrations.RunPython.noop),
    ]
