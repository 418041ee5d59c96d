"""Console fixtures: a few memories of every visibility in org alpha and one in org beta."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.test import Client

from memory import services as memory_services
from memory.models import Visibility
from teams.auth import actor_for_agent, actor_for_user


def actor(user, org):
    return actor_for_user(user, org)


def weave(act, *texts, visibility=Visibility.ORG, team=None, session_key=""):
    turns = [memory_services.TurnIn(text=t, speaker="Ana") for t in texts]
    return memory_services.weave_session(actor=act, turns=turns, visibility=visibility, team=team,
                                         session_key=session_key).node_ids


@dataclass
class Mem:
    member_private: int
    member_team: int
    owner_org: int
    owner_private: int
    agent_org: int
    beta_org: int
    beta_private: int


@pytest.fixture
def mem(world):
    a, b = world["a"], world["b"]
    member = actor(a.member, a.org)
    owner = actor(a.owner, a.org)
    agent = actor_for_agent(a.agent, scopes=frozenset({"read", "write"}))
    return Mem(
        member_private=weave(member, "My private note about the Lisbon offsite budget.",
                             visibility=Visibility.PRIVATE)[0],
        member_team=weave(member, "The core team picked Alfama for the Lisbon venue.", visibility=Visibility.TEAM,
                          team=a.team)[0],
        owner_org=weave(owner, "Everyone: the Lisbon offsite is on March 14.")[0],
        owner_private=weave(owner, "Owner secret: salary review for the Lisbon staff.",
                            visibility=Visibility.PRIVATE)[0],
        agent_org=weave(agent, "Agent summary: flights to Lisbon are booked.")[0],
        beta_org=weave(actor(b.owner, b.org), "Beta org note: Lisbon is also where beta meets.")[0],
        beta_private=weave(actor(b.member, b.org), "Beta private: Lisbon hotel codes.",
                           visibility=Visibility.PRIVATE)[0],
    )


@pytest.fixture
def login():
    def make(user) -> Client:
        c = Client()
        if user is not None:
            c.force_login(user)
        return c

    return make


@pytest.fixture
def two_orgs(world):
    """alpha's owner and member also belong to beta (as owner and member): the org switch and the
    stale-tab refusal. Data first: once Playwright runs, its event loop makes the ORM refuse this thread."""
    from teams.models import Membership

    a, b = world["a"], world["b"]
    Membership.objects.create(org=b.org, user=a.owner, role="owner")
    Membership.objects.create(org=b.org, user=a.member, role="member")
    return world
