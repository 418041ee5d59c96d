"""Reads, org first."""

from __future__ import annotations

from django.db.models import QuerySet

from .auth import Actor
from .models import Agent, ApiKey, Membership, Team, TeamMembership


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
