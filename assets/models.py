"""Memory assets and governance. The audit log lives here: every write, permission change,
approval and access decision is one append-only row."""

from __future__ import annotations

from django.db import models


class AuditEvent(models.Model):
    class Outcome(models.TextChoices):
        ALLOWED = "allowed"
        DENIED = "denied"
        DONE = "done"
        FAILED = "failed"

    org = models.ForeignKey("teams.Organization", on_delete=models.CASCADE, related_name="audit_events")
    actor_kind = models.CharField(max_length=16)  # user | agent | system
    actor_id = models.BigIntegerField(null=True)
    actor_label = models.CharField(max_length=255)
    action = models.CharField(max_length=64)
    object_type = models.CharField(max_length=64)
    object_id = models.CharField(max_length=64, blank=True, default="")
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default=Outcome.DONE)
    reason = models.CharField(max_length=255, blank=True, default="")
    detail = models.JSONField(default=dict, blank=True)
    request_id = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        indexes = [models.Index(fields=["org", "-id"], name="audit_org_recent")]
