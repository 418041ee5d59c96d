"""Memory REST API: weave, weave-session, resonate, nodes."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from assets.access import access_node
from nylon_project.api import Api, StrictSerializer, paginate, team_from_input

from . import selectors, services
from .engine.types import MAX_K
from .engine.types import NodeKind as EngineNodeKind
from .models import NodeKind, Visibility

WRITE_VISIBILITIES = [Visibility.PRIVATE, Visibility.TEAM, Visibility.ORG, Visibility.RESTRICTED]


class TurnInput(StrictSerializer):
    text = serializers.CharField(max_length=services.MAX_TEXT_CHARS, trim_whitespace=False)
    speaker = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    occurred_at = serializers.DateTimeField(required=False, allow_null=True, default=None)
    event_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    caption = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")
    metadata = serializers.DictField(required=False, default=dict)

    def validate_text(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("Empty text.")
        return value


class WriteScopeInput(StrictSerializer):
    visibility = serializers.ChoiceField(choices=WRITE_VISIBILITIES, default=Visibility.PRIVATE)
    team_id = serializers.IntegerField(required=False, allow_null=True, min_value=1, default=None)


class WeaveOutput(serializers.Serializer):
    node_ids = serializers.ListField(child=serializers.IntegerField())
    event_ids = serializers.DictField(child=serializers.IntegerField())
    created = serializers.IntegerField()
    embedded = serializers.BooleanField()
    session_key = serializers.CharField()


def _turn(d: dict) -> services.TurnIn:
    return services.TurnIn(text=d["text"], speaker=d["speaker"], occurred_at=d["occurred_at"],
                           event_id=d["event_id"], caption=d["caption"], metadata=d["metadata"])


class WeaveApi(Api):
    class InputSerializer(TurnInput, WriteScopeInput):
        session_key = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")

    @extend_schema(request=InputSerializer, responses={201: WeaveOutput})
    def post(self, request):
        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        d = s.validated_data
        result = services.weave_session(
            actor=request.actor, turns=[_turn(d)], session_key=d["session_key"], visibility=d["visibility"],
            team=team_from_input(request.actor, d["team_id"]), request_id=self.request_id(),
        )
        return Response(WeaveOutput(result).data, status=status.HTTP_201_CREATED)


class WeaveSessionApi(Api):
    class InputSerializer(WriteScopeInput):
        session_key = serializers.CharField(max_length=200)
        turns = TurnInput(many=True, allow_empty=False, max_length=2000)
        end_session = serializers.BooleanField(default=False)

    @extend_schema(request=InputSerializer, responses={201: WeaveOutput})
    def post(self, request):
        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        d = s.validated_data
        result = services.weave_session(
            actor=request.actor, turns=[_turn(t) for t in d["turns"]], session_key=d["session_key"],
            visibility=d["visibility"], team=team_from_input(request.actor, d["team_id"]), end_session=d["end_session"],
            request_id=self.request_id(),
        )
        return Response(WeaveOutput(result).data, status=status.HTTP_201_CREATED)


class NodeOutput(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    text = serializers.CharField()
    speaker = serializers.CharField()
    visibility = serializers.CharField()
    team_id = serializers.IntegerField(allow_null=True)
    owner = serializers.SerializerMethodField()
    silks = serializers.SerializerMethodField()
    confidence = serializers.FloatField()
    created_at = serializers.DateTimeField()

    def get_owner(self, n) -> dict:
        return {"kind": "agent", "id": n.owner_agent_id} if n.owner_agent_id else {"kind": "user",
                                                                                  "id": n.owner_user_id}

    def get_silks(self, n) -> dict:
        return {
            "fact": n.fact,
            "relations": {"entities": n.entities, "tags": n.tags},
            "temporal": {"occurred_at": n.occurred_at, "session_key": n.session_key, "seq": n.seq,
                         "valid_from": n.valid_from, "valid_to": n.valid_to, "time_refs": n.time_refs},
            "emotion": {"valence": n.valence, "intensity": n.intensity},
            "frequency": {"mentions": n.mentions, "last_recalled_at": n.last_recalled_at},
            "provenance": {"source_kind": n.source_kind, "source_user_id": n.source_user_id,
                           "source_agent_id": n.source_agent_id, "session_key": n.session_key,
                           "event_id": n.event_id, "source_node_ids": n.source_node_ids},
            "tension": {"t0": n.t0, "lambda_per_day": n.lam, "updated_at": n.tension_updated_at},
        }


class NodeListApi(Api):
    @extend_schema(responses=NodeOutput(many=True))
    def get(self, request):
        qs = selectors.visible_nodes(actor=request.actor)
        kind = request.query_params.get("kind")
        if kind:
            if kind not in NodeKind.values:
                raise serializers.ValidationError({"kind": ["Unknown kind."]})
            qs = qs.filter(kind=kind)
        session = request.query_params.get("session_key")
        if session:
            qs = qs.filter(session_key=session)
        return paginate(self, qs, NodeOutput)


class NodeDetailApi(Api):
    # Access (and its audit entry) is decided by assets.access, the one module for nodes and assets.
    @extend_schema(responses=NodeOutput)
    def get(self, request, node_id: int):
        node = access_node(request.actor, node_id, for_write=False, request_id=self.request_id())
        return Response(NodeOutput(node).data)

    @extend_schema(responses={204: None})
    def delete(self, request, node_id: int):
        node = access_node(request.actor, node_id, for_write=True, request_id=self.request_id())
        services.node_delete(actor=request.actor, node=node, request_id=self.request_id())
        return Response(status=status.HTTP_204_NO_CONTENT)


class HitOutput(serializers.Serializer):
    node_id = serializers.IntegerField()
    score = serializers.FloatField()
    text = serializers.CharField()
    kind = serializers.CharField()
    explanation = serializers.DictField()


class ResonateApi(Api):
    read_methods = ("POST",)  # a query, not a write: read-only keys may resonate

    class InputSerializer(StrictSerializer):
        query = serializers.CharField(max_length=4000)
        k = serializers.IntegerField(min_value=1, max_value=MAX_K, default=10)
        depth = serializers.IntegerField(min_value=0, max_value=4, required=False, allow_null=True, default=None)
        reinforce = serializers.BooleanField(default=True)

    class OutputSerializer(serializers.Serializer):
        hits = HitOutput(many=True)
        route = serializers.DictField()
        timing_ms = serializers.DictField()
        degraded = serializers.ListField(child=serializers.CharField())
        served_by = serializers.ChoiceField(choices=["engine", "postgres"])
        truncated = serializers.BooleanField()

    @extend_schema(request=InputSerializer, responses=OutputSerializer)
    def post(self, request):
        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        d = s.validated_data
        out = selectors.resonate_for(actor=request.actor, query=d["query"], k=d["k"], depth=d["depth"])
        kinds = {int(k): k.name.lower() for k in EngineNodeKind}
        hits = [
            {"node_id": h.node_id, "score": round(h.score, 6), "text": h.text, "kind": kinds[h.kind],
             "explanation": {"channels": h.explanation.channels, "seed": h.explanation.seed,
                             "path": list(h.explanation.path), "hops": h.explanation.hops,
                             "parts": h.explanation.parts}}
            for h in out.result.hits
        ]
        if d["reinforce"] and hits:
            services.record_recall(node_ids=[h["node_id"] for h in hits])
        degraded = [] if out.vector_used else ["embedder"]
        body = {
            "hits": hits,
            "route": {"qtype": out.plan.qtype, "depth": out.params.depth, "rule": out.plan.rule,
                      "entities": list(out.plan.entities)},
            "timing_ms": {"total": round(out.total_ms, 2), "embed": round(out.embed_ms, 2),
                          "engine": round(out.result.elapsed_ms, 2)},
            "degraded": degraded,
            "served_by": out.served_by,
            "truncated": out.result.truncated,
        }
        return Response(body)
