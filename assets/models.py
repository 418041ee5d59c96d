"""Memory assets and governance. The audit log lives here: every write, permission change,
approval and access decision is one append-only row."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
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


class ObjectType(models.TextChoices):
    NODE = "node"
    ASSET = "asset"


class GranteeKind(models.TextChoices):
    USER = "user"
    AGENT = "agent"
    TEAM_ROLE = "team_role"


class Permission(models.TextChoices):
    READ = "read"
    WRITE = "write"


class GrantTeamRole(models.TextChoices):
    MEMBER = "member"  # every member of the team (team admins and the team's agents included)
    ADMIN = "admin"  # team admins only


class AccessGrant(models.Model):
    """One ACL entry of a ``restricted`` node or asset. Restricted objects are readable only by
    their owner and by grantees: org admins and owners included (an admin may grant itself
    access, which is audited). ``write`` implies ``read``."""

    org = models.ForeignKey("teams.Organization", on_delete=models.CASCADE, related_name="+")
    object_type = models.CharField(max_length=8, choices=ObjectType.choices)
    object_id = models.BigIntegerField()
    grantee_kind = models.CharField(max_length=16, choices=GranteeKind.choices)
    grantee_user = models.ForeignKey("auth.User", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    grantee_agent = models.ForeignKey("teams.Agent", on_delete=models.CASCADE, null=True, blank=True,
                                      related_name="+")
    grantee_team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, null=True, blank=True,
                                     related_name="+")
    grantee_team_role = models.CharField(max_length=16, choices=GrantTeamRole.choices, blank=True, default="")
    permission = models.CharField(max_length=8, choices=Permission.choices, default=Permission.READ)
    granted_by = models.ForeignKey("auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    granted_by_label = models.CharField(max_length=255, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(grantee_kind="user", grantee_user__isnull=False, grantee_agent__isnull=True,
                             grantee_team__isnull=True)
                    | models.Q(grantee_kind="agent", grantee_agent__isnull=False, grantee_user__isnull=True,
                               grantee_team__isnull=True)
                    | models.Q(grantee_kind="team_role", grantee_team__isnull=False, grantee_user__isnull=True,
                               grantee_agent__isnull=True)
                ),
                name="grant_one_grantee",
            ),
            models.UniqueConstraint(
                fields=["object_type", "object_id", "grantee_kind", "grantee_user", "grantee_agent",
                        "grantee_team", "grantee_team_role"],
                name="grant_unique", nulls_distinct=False,
            ),
        ]
        indexes = [models.Index(fields=["org", "object_type", "object_id"], name="grant_object")]


class AssetKind(models.TextChoices):
    CHAT_MEMORY = "chat_memory"
    SKILL = "skill"
    WIKI = "wiki"
    PERSONA = "persona"  # L3: injected in full
    SCENARIO = "scenario"  # L2: injected as an index line, read in full through a tool


class AssetStatus(models.TextChoices):
    DRAFT = "draft"
    CANDIDATE = "candidate"
    APPROVED = "approved"
    DEPRECATED = "deprecated"
    ARCHIVED = "archived"


class Asset(models.Model):
    org = models.ForeignKey("teams.Organization", on_delete=models.CASCADE, related_name="assets")
    kind = models.CharField(max_length=16, choices=AssetKind.choices)
    title = models.CharField(max_length=200)
    summary = models.CharField(max_length=300, blank=True, default="")  # the one line of the L2 index
    body = models.TextField(blank=True, default="")
    node_ids = ArrayField(models.BigIntegerField(), default=list, blank=True)  # chat_memory
    owner_user = models.ForeignKey("auth.User", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    owner_agent = models.ForeignKey("teams.Agent", on_delete=models.CASCADE, null=True, blank=True,
                                    related_name="+")
    team = models.ForeignKey("teams.Team", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    visibility = models.CharField(max_length=16, default="private")  # memory.models.Visibility values
    status = models.CharField(max_length=16, choices=AssetStatus.choices, default=AssetStatus.DRAFT)
    version = models.IntegerField(default=1)
    content_hash = models.CharField(max_length=64)
    confidence = models.FloatField(default=1.0)
    usage_count = models.IntegerField(default=0)
    last_used_at = models.DateTimeField(null=True, blank=True)
    # A pending promotion (personal → team/org): applied when an approver approves the candidate.
    promotion = models.JSONField(default=dict, blank=True)
    approved_by = models.ForeignKey("auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    approved_at = models.DateTimeField(null=True, blank=True)
    # The version an approver last approved: what bound agents are served (``assets.selectors``).
    # ``version`` may be newer: an edit of an approved asset by someone who may not approve it
    # makes the asset a candidate again, and its new version waits for review while this one is
    # still served. None: never approved, nothing is served.
    approved_version = models.IntegerField(null=True, blank=True)
    # The last lifecycle move's reason, when it gave one (a rejection's, for the author): from, to,
    # note, by, at. Replaced by the next move.
    last_move_note = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(owner_user__isnull=False, owner_agent__isnull=True)
                           | models.Q(owner_user__isnull=True, owner_agent__isnull=False)),
                name="asset_one_owner",
            ),
        ]
        indexes = [models.Index(fields=["org", "-id"], name="asset_org_recent")]


class AssetVersion(models.Model):
    org = models.ForeignKey("teams.Organization", on_delete=models.CASCADE, related_name="+")
    asset = models.ForeignKey(Asset, on_delete=models.CASCADE, related_name="versions")
    version = models.IntegerField()
    title = models.CharField(max_length=200)
    summary = models.CharField(max_length=300, blank=True, default="")
    body = models.TextField(blank=True, default="")
    node_ids = ArrayField(models.BigIntegerField(), default=list, blank=True)
    content_hash = models.CharField(max_length=64)
    author_label = models.CharField(max_length=255, blank=True, default="")
    # Who saved it, by id: the label is a name at the time, and an agent renamed, or a new agent
    # given a former one's name, would match another's label (an agent may write again on its own
    # edit awaiting review, and only on its own).
    author_agent = models.ForeignKey("teams.Agent", on_delete=models.SET_NULL, null=True, blank=True,
                                     related_name="+")
    author_user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                                    blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    # When an approver approved this version's text (None: never approved, e.g. a rejected edit). An
    # agent reads an asset's history up to the served version, and only the versions approved in it:
    # "not newer than the served one" alone let it read an edit that was sent back.
    approved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["asset", "version"], name="asset_version_unique")]


class BindingMode(models.TextChoices):
    FULL = "full"  # injected in full
    INDEX = "index"  # title + one line in the index; full text through a tool
    TOOL = "tool"  # only reachable through a tool


class AgentBinding(models.Model):
    org = models.ForeignKey("teams.Organization", on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey("teams.Agent", on_delete=models.CASCADE, related_name="bindings")
    asset = models.ForeignKey(Asset, on_delete=models.CASCADE, related_name="bindings")
    mode = models.CharField(max_length=8, choices=BindingMode.choices, default=BindingMode.FULL)
    priority = models.IntegerField(default=100)  # lower first
    created_by = models.ForeignKey("auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent", "asset"], name="binding_unique")]
