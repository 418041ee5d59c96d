"""Background-work records: LLM usage per org and day, conflicts between memories, and the
durable state of idle reflection per session."""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class LlmUsage(models.Model):
    """Token usage per org (null: system work such as the health probe), day, provider and model."""

    org = models.ForeignKey("teams.Organization", on_delete=models.CASCADE, null=True, blank=True,
                            related_name="+")
    day = models.DateField()
    provider = models.CharField(max_length=32)
    model = models.CharField(max_length=200)
    calls = models.IntegerField(default=0)
    errors = models.IntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "day", "provider", "model"], name="llm_usage_unique",
                                    nulls_distinct=False),
        ]


class Conflict(models.Model):
    class Status(models.TextChoices):
        OPEN = "open"
        KEPT_BOTH = "kept_both"
        SUPERSEDED = "superseded"
        REJECTED = "rejected"

    class Detector(models.TextChoices):
        RULE = "rule"
        LLM = "llm"

    org = models.ForeignKey("teams.Organization", on_delete=models.CASCADE, related_name="+")
    # node_a is the older node (smaller id); one row per unordered pair.
    node_a = models.ForeignKey("memory.Node", on_delete=models.CASCADE, related_name="+")
    node_b = models.ForeignKey("memory.Node", on_delete=models.CASCADE, related_name="+")
    reason = models.CharField(max_length=500)
    detector = models.CharField(max_length=8, choices=Detector.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    kept_node = models.ForeignKey("memory.Node", on_delete=models.SET_NULL, null=True, blank=True,
                                  related_name="+")
    resolved_by = models.CharField(max_length=255, blank=True, default="")  # actor label
    resolved_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["node_a", "node_b"], name="conflict_pair_unique"),
            models.CheckConstraint(condition=Q(node_a__lt=models.F("node_b")), name="conflict_pair_ordered"),
        ]
        indexes = [models.Index(fields=["org", "status", "-id"], name="conflict_org_status")]


class SessionWork(models.Model):
    """Durable bookkeeping of background work per session. The drivers are
    ``MemorySession.abstraction_status`` / ``reflection_status``; this row records how far
    abstraction got, when work was last tried (the beat's retry clock) and why reflection did (or
    did not) produce bridges."""

    class Reflection(models.TextChoices):
        NONE = ""
        DONE = "done"
        SKIPPED = "skipped"
        FAILED = "failed"

    org = models.ForeignKey("teams.Organization", on_delete=models.CASCADE, related_name="+")
    session = models.OneToOneField("memory.MemorySession", on_delete=models.CASCADE, related_name="+")
    abstracted_upto = models.IntegerField(default=-1)  # highest leaf seq already abstracted
    facts = models.IntegerField(default=0)
    abstraction_tried_at = models.DateTimeField(null=True, blank=True)
    reflection = models.CharField(max_length=16, choices=Reflection.choices, blank=True, default="")
    reflection_detail = models.CharField(max_length=500, blank=True, default="")
    reflection_tried_at = models.DateTimeField(null=True, blank=True)
    reflection_attempts = models.IntegerField(default=0)
    bridges = models.IntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)
