from django.db import migrations, models


def approved_versions(apps, schema_editor):
    """Which versions were approved, as far as the database can tell: each asset's approved version,
    and every version an audit entry says was approved (a transition to approved, or an approver's
    own edit), since the audit has recorded the version."""
    Asset = apps.get_model("assets", "Asset")
    AssetVersion = apps.get_model("assets", "AssetVersion")
    AuditEvent = apps.get_model("assets", "AuditEvent")
    for asset_id, version, at, created in (Asset.objects.filter(approved_version__isnull=False)
                                           .values_list("id", "approved_version", "approved_at", "updated_at")):
        AssetVersion.objects.filter(asset_id=asset_id, version=version).update(approved_at=at or created)
    events = AuditEvent.objects.filter(object_type="asset", action__in=["asset.transition", "asset.update"])
    for object_id, action, detail, at in events.values_list("object_id", "action", "detail", "created_at").iterator():
        if not isinstance(detail, dict):
            continue
        approved = (detail.get("to") == "approved" if action == "asset.transition"
                    else detail.get("review") == "approved_by_editor")
        if approved and isinstance(detail.get("version"), int) and object_id.isdigit():
            AssetVersion.objects.filter(asset_id=int(object_id), version=detail["version"],
                                        approved_at__isnull=True).update(approved_at=at)


class Migration(migrations.Migration):

    dependencies = [
        ("assets", "0004_asset_last_move_note"),
    ]

    operations = [
        migrations.AddField(
            model_name="assetversion",
            name="approved_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(approved_versions, migrations.RunPython.noop),
    ]
