"""The one place that decides who may see or change tenancy objects.

Objects of another org are looked up with the org filter first, so they are simply not found
(404). Inside the org, a lack of rights is a 403 for objects the actor can already see.
"""

from __future__ import annotations

from django.http import Http404
from rest_framework.exceptions import PermissionDenied

from .auth import Actor
from .models import Agent, ApiKey, Invitation, Membership, Team


def require_org_admin(actor: Actor, *, action: str = "do this") -> None:
    """``action`` completes "Only organisation admins may …": a verb phrase ("create teams")."""
    if not actor.is_org_admin:
        raise PermissionDenied(f"Only organisation admins may {action}.")


def can_admin_team(actor: Actor, team_id: int) -> bool:
    return actor.is_org_admin or team_id in actor.team_admin_ids


def access_team_by_id(actor: Actor, team_id: int, *, for_write: bool) -> Team:
    team = Team.objects.filter(org=actor.org, id=team_id).first()
    if team is None:
        raise Http404
    if for_write and not can_admin_team(actor, team.id):
        raise PermissionDenied("Only organisation or team admins may change this team.")
    return team


def access_agent_by_id(actor: Actor, agent_id: int, *, for_write: bool) -> Agent:
    agent = Agent.objects.filter(org=actor.org, id=agent_id).select_related("team").first()
    if agent is None:
        raise Http404
    if for_write:
        require_org_admin(actor, action="change agents")
    return agent


def access_key_by_id(actor: Actor, key_id: int, *, for_write: bool) -> ApiKey:
    key = ApiKey.objects.filter(org=actor.org, id=key_id).select_related("agent").first()
    if key is None:
        raise Http404
    # An agent may see its own keys; everything else about keys is for org admins.
    if actor.agent is not None and key.agent_id == actor.agent.id and not for_write:
        return key
    require_org_admin(actor, action="manage API keys")
    return key


def access_membership_by_user_id(actor: Actor, user_id: int, *, for_write: bool) -> Membership:
    membership = Membership.objects.filter(org=actor.org, user_id=user_id).select_related("user").first()
    if membership is None:
        raise Http404
    if for_write:
        require_org_admin(actor, action="change memberships")
    return membership


def access_invitation_by_id(actor: Actor, invitation_id: int) -> Invitation:
    """Invitations are for org admins only, reads included (they name people who are not members)."""
    invitation = Invitation.objects.filter(org=actor.org, id=invitation_id).first()
    if invitation is None:
        raise Http404
    require_org_admin(actor, action="manage invitations")
    return invitation
