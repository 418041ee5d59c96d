"""Conflicts and background-work status API."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from nylon_project.api import Api, StrictSerializer, filter_params, paginate
from nylon_project.pagination import CursorPage

from . import conflicts, services
from .models import Conflict


class ConflictNodeOutput(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    text = serializers.CharField()
    speaker = serializers.CharField()
    occurred_at = serializers.DateTimeField()
    valid_to = serializers.DateTimeField(allow_null=True)


class ConflictOutput(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()
    reason = serializers.CharField()
    detector = serializers.CharField()
    node_a = ConflictNodeOutput()
    node_b = ConflictNodeOutput()
    kept_node_id = serializers.IntegerField(allow_null=True)
    resolved_by = serializers.SerializerMethodField(help_text="Who resolved it (an actor label); to agent keys a "
                                                    "username that is an email address shows its local part.")
    resolved_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()

    def get_resolved_by(self, c) -> str:
        from assets.context import label_for_agents

        return label_for_agents(c.resolved_by) if self.context.get("for_agent") else c.resolved_by


class ConflictListApi(Api):
    pagination_class = CursorPage

    class QueryInput(StrictSerializer):
        status = serializers.ChoiceField(choices=Conflict.Status.values, required=False,
                                         error_messages={"invalid_choice": "Unknown status."})

    @extend_schema(parameters=[QueryInput], responses=ConflictOutput(many=True))
    def get(self, request):
        """Pages the conflicts between memories the caller may read, filtered by status. Any member or agent
        key; an unknown status or query parameter is a 400."""

        q = self.QueryInput(data=filter_params(request))
        q.is_valid(raise_exception=True)
        return paginate(self, conflicts.visible_conflicts(actor=request.actor).filter(**q.validated_data),
                        ConflictOutput, context={"for_agent": request.actor.agent is not None})


class ConflictResolveApi(Api):
    class InputSerializer(StrictSerializer):
        action = serializers.ChoiceField(choices=list(conflicts.ACTIONS))
        keep = serializers.IntegerField(required=False, allow_null=True, min_value=1, default=None)

        def validate(self, attrs):
            # A memory named to keep while keeping both or rejecting was silently dropped: the caller
            # may have meant to supersede.
            if attrs.get("keep") is not None and attrs["action"] != "supersede":
                raise serializers.ValidationError({"keep": ["Only with action=supersede."]})
            return attrs

    @extend_schema(request=InputSerializer, responses=ConflictOutput)
    def post(self, request, conflict_id: int):
        """Resolves an open conflict: keep both, or keep one (keep names it) and supersede the other. Callers
        who may change the memories: superseding needs write access to the superseded one, keeping both or
        rejecting to at least one of the two (a reader who may change neither gets a 403); 404 for a conflict
        the caller cannot see; 409 conflict_already_resolved for one already resolved (nothing changes)."""

        conflict = conflicts.visible_conflicts(actor=request.actor).filter(id=conflict_id).first()
        if conflict is None:
            raise Http404
        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        c = conflicts.resolve(actor=request.actor, conflict=conflict, action=s.validated_data["action"],
                              keep_id=s.validated_data["keep"], request_id=self.request_id())
        c = conflicts.visible_conflicts(actor=request.actor).get(pk=c.pk)
        return Response(ConflictOutput(c, context={"for_agent": request.actor.agent is not None}).data)


class BackgroundStatusApi(Api):
    @extend_schema(responses=serializers.DictField())
    def get(self, request):
        """The state of the background work on the caller's own sessions: abstraction and reflection counts,
        recent failures, sessions abstracted with the heuristic fallback, and the LLM's state per task kind."""

        return Response(services.status_for(actor=request.actor))
