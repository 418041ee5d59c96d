"""Reads, org first."""

from __future__ import annotations

from django.db.models import QuerySet
from django.utils import timezone

from .auth import Actor, hash_secret
from .models import Agent, ApiKey, Invitation, Membership, Team, TeamMembership


def team_list(*, actor: Actor) -> QuerySet[Team]:
    return Team.objects.filter(org=actor.org)


def team_member_list(*, actor: Actor, team: Team) -> QuerySet[TeamMembership]:
    return TeamMembership.objects.filter(org=actor.org, team=team).select_related("user")


def member_list(*, actor: Actor) -> QuerySet[Membership]:
    return Membership.objects.filter(org=actor.org).select_related("user")


def agent_list(*, actor: Actor) -> QuerySet[Agent]:
    return Agent.objects.filter(org=actor.org).select_related("team")


def key_list(*, actor: Actor, agent: Agent) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(org=actor.org, agent=agent)


def invitation_pending_list(*, actor: Actor) -> QuerySet[Invitation]:
    """Open and not yet expired: the links an invitee can still use."""
    return Invitation.objects.filter(org=actor.org, accepted_at__isnull=True, revoked_at__isnull=True,
                                     expires_at__gt=timezone.now())


# A token we issue is 43 characters (secrets.token_urlsafe(32)); anything much longer is not ours.
MAX_TOKEN_LENGTH = 100


def invitation_by_token(*, token: str) -> Invitation | None:
    """The invitation a link names, in any state, or None. Not scoped by org: the token is the
    whole credential, and only its hash is stored."""
    if not token or len(token) > MAX_TOKEN_LENGTH:
        return None
    return Invitation.objects.select_related("org", "invited_by").filter(token_hash=hash_secret(token)).first()
