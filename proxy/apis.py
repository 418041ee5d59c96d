"""GET /api/v1/proxy/stats: the memory proxy's measurements per agent."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from nylon_project.api import Api
from teams.models import Agent

from . import stats


class ProxyStatsApi(Api):
    """An agent sees its own numbers; a console user sees every agent of the organisation."""

    @extend_schema(responses=serializers.DictField())
    def get(self, request):
        actor = request.actor
        if actor.agent is not None:
            agents = [actor.agent]
        else:
            ids = stats.agent_ids(actor.org.id)
            agents = list(Agent.objects.filter(org=actor.org, id__in=ids).order_by("id"))
        rows = [{"agent_id": a.id, "agent": a.name, **stats.read(actor.org.id, a.id)} for a in agents]
        return Response({"agents": rows})
