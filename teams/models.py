"""Tenancy: organisations (tenants), teams, memberships with roles, agents and their API keys.

Every tenant row carries its ``org`` so any lookup can be scoped by org first; a row of another
org is simply not found (404), never forbidden.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class Organization(models.Model):
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Per-org overrides (LLM provider, budgets); validated by the services that read them.
    settings = models.JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return self.slug


class Role(models.TextChoices):
    OWNER = "owner", _("Owner")
    ADMIN = "admin", _("Admin")
    MEMBER = "member", _("Member")


ROLE_RANK = {Role.MEMBER: 1, Role.ADMIN: 2, Role.OWNER: 3}


class Membership(models.Model):
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "user"], name="uniq_membership_org_user")]

    def __str__(self) -> str:
        return f"{self.user_id}@{self.org_id}:{self.role}"


class Team(models.Model):
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="teams")
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80)
    description = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "slug"], name="uniq_team_org_slug")]

    def __str__(self) -> str:
        return self.slug


class TeamRole(models.TextChoices):
    ADMIN = "admin", _("Team admin")
    MEMBER = "member", _("Team member")


class TeamMembership(models.Model):
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="team_memberships")
    role = models.CharField(max_length=16, choices=TeamRole.choices, default=TeamRole.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="uniq_team_membership")]


AGENT_DEFAULT_VISIBILITIES = [("private", _("Private: the agent only")), ("team", _("Its team")),
                              ("org", _("Organisation"))]


class Agent(models.Model):
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="agents")
    team = models.ForeignKey(Team, on_delete=models.SET_NULL, null=True, blank=True, related_name="agents")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, default="")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    is_active = models.BooleanField(default=True)
    # What the agent's writes get when they name no visibility (weave, sessions, bulk, MCP, the
    # proxy's write-back). A new agent in a team shares with it (agents_create), a new agent without one
    # keeps its writes private; agents made before this field keep "private".
    default_visibility = models.CharField(max_length=10, choices=AGENT_DEFAULT_VISIBILITIES, default="private")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "name"], name="uniq_agent_org_name")]

    def __str__(self) -> str:
        return self.name


class Scope(models.TextChoices):
    READ = "read", _("Read")
    WRITE = "write", _("Write")


class ApiKey(models.Model):
    """An agent's key. Only a SHA-256 of the secret is stored; the plain key is shown once.

    Format: ``nyl_<prefix>_<secret>``. The prefix is unique and indexed so a request costs one
    indexed lookup plus a constant-time hash comparison.
    """

    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="api_keys")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="keys")
    name = models.CharField(max_length=200, blank=True, default="")
    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    scopes = models.JSONField(default=list)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class InvitationStatus(models.TextChoices):
    PENDING = "pending", _("Pending")
    ACCEPTED = "accepted", _("Accepted")
    REVOKED = "revoked", _("Revoked")
    EXPIRED = "expired", _("Expired")


class Invitation(models.Model):
    """An org admin's invitation of an email address to the org with a role.

    Nobody is a member until the invitee accepts through the link (``/invite/<token>``). Only a
    SHA-256 of the link's token is stored (``teams.auth.hash_secret``): the plain link is shown
    once to the admin (and mailed, when mail is configured). At most one invitation per org and
    email is open (neither accepted nor revoked): inviting again revokes the old link.
    """

    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField(max_length=254)  # as the admin typed it; compared case-insensitively
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # Set when an admin revokes it, a new invitation replaces it, or the invitee declines.
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # An expired link still counts as open here (now() cannot be in an index predicate);
            # a re-invite revokes it first, so the slot is never stuck.
            models.UniqueConstraint(
                "org", Lower("email"),
                condition=Q(accepted_at__isnull=True, revoked_at__isnull=True),
                name="uniq_open_invitation_org_email",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.email}@{self.org_id}:{self.role}"

    @property
    def status(self) -> str:
        if self.accepted_at is not None:
            return InvitationStatus.ACCEPTED
        if self.revoked_at is not None:
            return InvitationStatus.REVOKED
        if self.expires_at <= timezone.now():
            return InvitationStatus.EXPIRED
        return InvitationStatus.PENDING
