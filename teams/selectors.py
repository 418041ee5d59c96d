"""Reads, org first."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from .auth import Actor, hash_secret
from .models import Agent, ApiKey, Invitation, Membership, Team, TeamMembership


def team_list(*, actor: Actor) -> QuerySet[Team]:
    return Team.objects.filter(org=actor.org)


@dataclass(frozen=True)
class TeamHoldings:
    """What names a team, for its deletion: ``shared_*`` are shared with the team (visibility
    ``team``), the memories and assets whose readers the deletion must settle; ``other_*`` name the
    team with another visibility (its admins' write rights only); ``agents`` are in the team."""

    shared_nodes: int
    shared_assets: int
    other_nodes: int
    other_assets: int
    agents: list[Agent]
    grants: int

    @property
    def shared(self) -> int:
        return self.shared_nodes + self.shared_assets


def team_holdings(*, team: Team) -> TeamHoldings:
    # Imported here: memory and assets import teams' models at load time.
    from assets.models import AccessGrant, Asset
    from memory.models import Node, Visibility

    shared = Q(visibility=Visibility.TEAM)
    nodes = Node.objects.filter(org_id=team.org_id, team=team, deleted_at__isnull=True).aggregate(
        shared=Count("id", filter=shared), other=Count("id", filter=~shared))
    assets = Asset.objects.filter(org_id=team.org_id, team=team).aggregate(
        shared=Count("id", filter=shared), other=Count("id", filter=~shared))
    return TeamHoldings(
        shared_nodes=nodes["shared"], shared_assets=assets["shared"],
        other_nodes=nodes["other"], other_assets=assets["other"],
        agents=list(Agent.objects.filter(org_id=team.org_id, team=team).order_by("name")),
        grants=AccessGrant.objects.filter(org_id=team.org_id, grantee_team=team).count(),
    )


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
