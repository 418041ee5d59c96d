"""Memory REST API: weave, weave-session, resonate, nodes."""

from __future__ import annotations

import io
import time
from datetime import timedelta

from django.http import Http404
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ParseError
from rest_framework.response import Response

from assets.access import access_node
from assets.context import NO_VECTOR, hits_matching, matched_ids, recall_disputes, recall_meta
from nylon_project.api import (
    Api,
    StrictSerializer,
    filter_params,
    paginate,
    team_from_input,
)
from nylon_project.errors import error_body
from nylon_project.pagination import CursorPage
from nylon_project.parsers import SafeJSONParser, UnstorableBodyText, unstorable_path, unstorable_text
from nylon_project.schema import ErrorResponse

from . import selectors, services
from .embedding import get_embedder
from .engine.types import MAX_K
from .engine.types import NodeKind as EngineNodeKind
from .models import NodeKind, Visibility

WRITE_VISIBILITIES = [Visibility.PRIVATE, Visibility.TEAM, Visibility.ORG, Visibility.RESTRICTED]


class OccurredAtField(serializers.DateTimeField):
    """When a turn happened: not later than a day from now. A week ahead was stored and shown as
    the memory's time (a client's clock or zone wrong, most likely); a day covers zones and skew."""

    def to_internal_value(self, value):
        when = super().to_internal_value(value)
        if when > timezone.now() + FUTURE_SKEW:
            raise serializers.ValidationError("Is in the future: when the turn happened, at most a day from now.")
        return when


FUTURE_SKEW = timedelta(days=1)


class TurnInput(StrictSerializer):
    text = serializers.CharField(max_length=services.MAX_TEXT_CHARS, trim_whitespace=False)
    speaker = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    occurred_at = OccurredAtField(required=False, allow_null=True, default=None)
    event_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    caption = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")
    metadata = serializers.DictField(required=False, default=dict)

    def validate_text(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("Empty text.")
        return value


class WriteScopeInput(StrictSerializer):
    visibility = serializers.ChoiceField(
        choices=WRITE_VISIBILITIES, required=False, default=None,
        help_text="Who may read it. Default: an agent's default_visibility (its team for an agent created in a "
                  "team), private for a person.")
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


def event_id_clash(seen: dict, at, turn: services.TurnIn) -> tuple[object, str] | None:
    """Where an earlier turn of the request (``seen``: event_id -> (at, turn)) used this turn's
    event_id with other content, and what differs ("text" or "content"); else None. Records the turn.

    The write keeps one node per event_id, so the later turn would be dropped without a word; an
    identical repeat is a retry inside the request and stays idempotent."""
    if not turn.event_id:
        return None
    first_at, first = seen.setdefault(turn.event_id, (at, turn))
    if first == turn:
        return None
    return first_at, "text" if first.text != turn.text else "content"


REPLAY_CODES = ("201 when the write created memories, 200 when it created none (every event_id was already stored "
                "with the same text, speaker and session: an idempotent replay). An event_id already stored with a "
                "different text, speaker or session_key, or with another visibility, team_id or occurred_at than the "
                "retry names, is a 409 event_id_reused naming it, and nothing is written.")

CHANGED_REPLAY_409 = OpenApiResponse(
    ErrorResponse, description="event_id_reused: an event_id already stored with a different text, speaker or "
                               "session_key, or another visibility, team_id or occurred_at than named (error.fields "
                               "names each turn); nothing was written.")


def _written(data: dict, created: int) -> Response:
    """201 when the write created memories, 200 for an idempotent replay that created none."""
    return Response(data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


def _changed_replay(request, exc: services.ChangedReplay, fields: dict | None = None) -> Response:
    # The one error shape carries fields only for 400s; this 409 names the turns, as the path's 400s do.
    body = error_body(exc.default_code, exc.message, fields=fields if fields is not None else exc.detail,
                      request=request)
    return Response(body, status=exc.status_code)


class WeaveApi(Api):
    class InputSerializer(TurnInput, WriteScopeInput):
        session_key = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")

    @extend_schema(request=InputSerializer, responses={201: WeaveOutput, 200: WeaveOutput, 409: CHANGED_REPLAY_409})
    def post(self, request):
        """Stores one turn as a memory leaf of the caller (an agent key or a signed-in user), in session_key's
        session if given, with the silks weave-session gives it. Needs a write-scoped key; a team_id outside
        the org is a 400, and a text over the limit (caption included) a 400 on text.

        201 when the write created the memory, 200 when its event_id was already stored with the same text,
        speaker and session (an idempotent replay). An event_id already stored with a different text,
        speaker or session_key, or with another visibility, team_id or occurred_at than the retry names,
        is a 409 event_id_reused naming it, and nothing is written."""

        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        d = s.validated_data
        turn = _turn(d)
        problem = services.turn_problem(turn)
        if problem:
            # /weave has no turns list: the error goes on its own field (the caption counts toward the limit).
            raise serializers.ValidationError({"text": [problem]})
        try:
            result = services.weave_session(
                actor=request.actor, turns=[turn], session_key=d["session_key"], visibility=d["visibility"],
                team=team_from_input(request.actor, d["team_id"]), request_id=self.request_id(),
            )
        except services.ChangedReplay as exc:
            # /weave has no turns list: the error goes on its own field, as its 400s do.
            return _changed_replay(request, exc, fields=exc.detail["turns"]["0"])
        return _written(WeaveOutput(result).data, result.created)


class WeaveSessionApi(Api):
    class InputSerializer(WriteScopeInput):
        session_key = serializers.CharField(max_length=200)
        turns = TurnInput(many=True, allow_empty=False, max_length=2000)
        end_session = serializers.BooleanField(default=False)

        def validate_turns(self, turns: list[dict]) -> list[dict]:
            seen: dict = {}
            errors = {}  # keyed by the turn's index, as every other per-turn error (and bulk's)
            for i, t in enumerate(turns):
                clash = event_id_clash(seen, i, _turn(t))
                if clash:
                    errors[str(i)] = {"event_id": [f"Repeats turn {clash[0]}'s event_id with different {clash[1]}."]}
            if errors:
                raise serializers.ValidationError(errors)
            return turns

    @extend_schema(request=InputSerializer, responses={201: WeaveOutput, 200: WeaveOutput, 409: CHANGED_REPLAY_409})
    def post(self, request):
        """Stores a session's turns (up to 2,000) as memory leaves of the caller, in order, with temporal,
        entity and similarity edges; a turn whose event_id the caller already stored is not written again.
        Needs a write-scoped key; an event_id repeated in the request with different content is a 400 on
        that turn's event_id.

        201 when the write created memories, 200 when it created none (every event_id was already stored
        with the same text, speaker and session: an idempotent replay). An event_id already stored with a
        different text, speaker or session_key, or with another visibility, team_id or occurred_at than
        the retry names, is a 409 event_id_reused on that turn's event_id, and nothing is written."""

        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        d = s.validated_data
        try:
            result = services.weave_session(
                actor=request.actor, turns=[_turn(t) for t in d["turns"]], session_key=d["session_key"],
                visibility=d["visibility"], team=team_from_input(request.actor, d["team_id"]),
                end_session=d["end_session"], request_id=self.request_id(),
            )
        except services.ChangedReplay as exc:
            return _changed_replay(request, exc)
        return _written(WeaveOutput(result).data, result.created)


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
    pagination_class = CursorPage

    class QueryInput(StrictSerializer):
        # Strict, as the other list filters: a misspelt filter (``?kinds=fact``) is a 400, not every node.
        kind = serializers.ChoiceField(choices=NodeKind.values, required=False,
                                       error_messages={"invalid_choice": "Unknown kind."})
        session_key = serializers.CharField(max_length=200, required=False, allow_blank=True, trim_whitespace=False)
        # The console's memory browser filters by these two as well (frontend.selectors.filtered_nodes).
        visibility = serializers.ChoiceField(choices=Visibility.values, required=False,
                                             error_messages={"invalid_choice": "Unknown visibility."})
        team_id = serializers.IntegerField(min_value=1, required=False)

    @extend_schema(parameters=[QueryInput], responses=NodeOutput(many=True))
    def get(self, request):
        """Pages the memory nodes the caller may read, newest first, filtered by kind, session_key, visibility
        and team_id (a team of the organisation, else a 400). Any read key or member; an unknown query
        parameter is a 400."""

        q = self.QueryInput(data=filter_params(request))
        q.is_valid(raise_exception=True)
        d = q.validated_data
        qs = selectors.visible_nodes(actor=request.actor)  # the filters only narrow what the caller may read
        if "kind" in d:
            qs = qs.filter(kind=d["kind"])
        if d.get("session_key"):
            qs = qs.filter(session_key=d["session_key"])
        if "visibility" in d:
            qs = qs.filter(visibility=d["visibility"])
        if "team_id" in d:
            qs = qs.filter(team=team_from_input(request.actor, d["team_id"]))
        return paginate(self, qs, NodeOutput)


class NodeDetailApi(Api):
    # Access (and its audit entry) is decided by assets.access, the one module for nodes and assets.
    @extend_schema(responses=NodeOutput)
    def get(self, request, node_id: int):
        """One memory node with its silks, if the caller may read it (else a 404, audited)."""

        node = access_node(request.actor, node_id, for_write=False, request_id=self.request_id())
        return Response(NodeOutput(node).data)

    @extend_schema(responses={204: None})
    def delete(self, request, node_id: int):
        """Deletes the memory node. Its owner, an admin of its scope or an ACL writer may; others get a 403,
        or a 404 when they may not even read it. What was drawn from it (facts, bridges) and has no other
        live source is deleted with it, each deletion audited (``memory.delete``, reason ``sources_deleted``).
        What it superseded (a conflict resolved by keeping it) is current again unless another existing
        memory superseded it too, each audited (``memory.reinstate``). A later write with its event_id is
        a new memory."""

        node = access_node(request.actor, node_id, for_write=True, request_id=self.request_id())
        services.node_delete(actor=request.actor, node=node, request_id=self.request_id())
        return Response(status=status.HTTP_204_NO_CONTENT)


class DisputeOutput(serializers.Serializer):
    node_id = serializers.IntegerField()
    occurred_at = serializers.DateTimeField(allow_null=True)


class HitOutput(serializers.Serializer):
    node_id = serializers.IntegerField()
    score = serializers.FloatField()
    text = serializers.CharField()
    kind = serializers.CharField()
    explanation = serializers.DictField()
    # The memories the caller may read that this one is in an open conflict with, oldest first (as
    # /context's ``disputed_by``): the raw list put "We use Postgres 15" first, unmarked, while the
    # conflict with "we moved to Postgres 16" waited for someone to resolve it.
    disputed_by = DisputeOutput(many=True)
    # When it happened and who said it, as /context's recall items: a hit listed with only the
    # other side's date (``disputed_by``) left the client unable to tell which side is stale.
    occurred_at = serializers.DateTimeField(allow_null=True)
    speaker = serializers.CharField(allow_blank=True)
    # Whether it matches the query by its words or close in meaning (as /context's ``matched``): only
    # matching hits are reinforced.
    matched = serializers.BooleanField()


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
        """Recalls the memories that best answer query, from the nodes the caller may read, with why each was
        found, and with the memories each one is in an open conflict with (``disputed_by``). Read-only keys
        may call it; reinforce=false leaves the recall counts alone, and only hits that match the query
        (``matched``) are reinforced."""

        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        d = s.validated_data
        # The query's vector is made here: the match rule needs it too (as assets.context.recall_for);
        # a failed embed is passed on as no vector, so resonate_for searches by words and says so.
        embedder = get_embedder()
        t0 = time.perf_counter()
        query_vec = embedder.query(d["query"])
        embed_ms = (time.perf_counter() - t0) * 1000
        out = selectors.resonate_for(actor=request.actor, query=d["query"], k=d["k"], depth=d["depth"],
                                     query_vec=NO_VECTOR if query_vec is None else query_vec)
        kinds = {int(k): k.name.lower() for k in EngineNodeKind}
        ids = [h.node_id for h in out.result.hits]
        matching = hits_matching(actor=request.actor, out=out, query=d["query"], query_vec=query_vec)
        meta = recall_meta(request.actor.org, ids)
        disputes = recall_disputes(request.actor, ids)
        hits = [
            {"node_id": h.node_id, "score": round(h.score, 6), "text": h.text, "kind": kinds[h.kind],
             "explanation": {"channels": h.explanation.channels, "seed": h.explanation.seed,
                             "path": list(h.explanation.path), "hops": h.explanation.hops,
                             "parts": h.explanation.parts},
             "disputed_by": disputes.get(h.node_id, []),
             "occurred_at": meta.get(h.node_id, {}).get("occurred_at"),
             "speaker": meta.get(h.node_id, {}).get("speaker", ""),
             "matched": h.node_id in matching}
            for h in out.result.hits
        ]
        if d["reinforce"] and (recalled := matched_ids(hits)):
            services.record_recall(node_ids=recalled)
        degraded = [] if out.vector_used else ["embedder"]
        body = {
            "hits": hits,
            "route": {"qtype": out.plan.qtype, "depth": out.params.depth, "rule": out.plan.rule,
                      "entities": list(out.plan.entities)},
            "timing_ms": {"total": round(embed_ms + out.total_ms, 2), "embed": round(embed_ms + out.embed_ms, 2),
                          "engine": round(out.result.elapsed_ms, 2)},
            "degraded": degraded,
            "served_by": out.served_by,
            "truncated": out.result.truncated,
        }
        return Response(body)


# --- bulk ingest ---------------------------------------------------------------------------------------

_SESSION_FIELDS = frozenset({"session_key", "turns", "visibility", "team_id", "end_session"})
_TURN_FIELDS = frozenset({"text", "speaker", "occurred_at", "event_id", "caption", "metadata"})


class JSONLinesParser(SafeJSONParser):
    """``application/x-ndjson``: one JSON value per line, each held to SafeJSONParser's rules."""

    media_type = "application/x-ndjson"

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        out = []
        for n, line in enumerate(raw.splitlines(), 1):
            if line.strip():
                try:
                    out.append(super().parse(io.BytesIO(line), media_type, parser_context))
                except UnstorableBodyText as exc:
                    # the path as in a JSON array body: the session's index, not its line number
                    path = f"[{len(out)}].{exc.field_path}" if exc.field_path else None
                    raise UnstorableBodyText(f"Line {n}: {exc.detail}", path) from None
                except ParseError as exc:
                    raise ParseError(f"Line {n}: {exc.detail}") from None
        return out


def _text_field(raw: dict, name: str, max_length: int, err: dict, *, required: bool = False,
                trim: bool = True) -> str:
    if name not in raw:
        if required:
            err[name] = ["This field is required."]
        return ""
    value = raw[name]
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)  # as DRF's CharField
    if not isinstance(value, str):
        err[name] = ["Not a valid string."]
        return ""
    if trim:
        # As weave-session's CharFields (trim_whitespace): the same body must store the same
        # session key and event id on both paths, or a retry through the other one writes twice.
        value = value.strip()
    if len(value) > max_length:
        err[name] = [f"Ensure this field has no more than {max_length} characters."]
    elif unstorable_text(value):
        err[name] = ["NUL characters and unpaired surrogates are not allowed."]
    else:
        return value
    return ""


# Weave's occurred_at field itself (a field holds no per-request state): running it alone costs a few
# µs, where a whole TurnInput per turn would cost as much as writing the row.
_OCCURRED_AT = TurnInput().fields["occurred_at"]


def _bulk_turn(raw) -> tuple[services.TurnIn | None, dict]:
    if not isinstance(raw, dict):
        return None, {"non_field_errors": ["Expected an object."]}
    err: dict = {k: ["Unknown field."] for k in raw if k not in _TURN_FIELDS}
    text = _text_field(raw, "text", services.MAX_TEXT_CHARS, err, required=True, trim=False)
    if "text" not in err and not text.strip():
        err["text"] = ["Empty text."]
    speaker = _text_field(raw, "speaker", 200, err)
    event_id = _text_field(raw, "event_id", 200, err)
    caption = _text_field(raw, "caption", 2000, err)
    occurred = raw.get("occurred_at")
    if occurred is not None:
        # Weave's own field, so both paths take the same datetimes: ISO 8601, naive read in the
        # current zone, and "out of range" when the instant falls outside years 1-9999 there
        # ("0001-01-01T00:30:00+05:00"): Postgres would store it but Python cannot read it back.
        try:
            occurred = _OCCURRED_AT.to_internal_value(occurred)
        except serializers.ValidationError as exc:
            err["occurred_at"] = exc.detail
    metadata = raw.get("metadata", {})
    if not isinstance(metadata, dict):
        err["metadata"] = [f'Expected a dictionary of items but got type "{type(metadata).__name__}".']
    elif unstorable_path(metadata) is not None:
        err["metadata"] = ["NUL characters and unpaired surrogates are not allowed."]
    if err:
        return None, err
    return services.TurnIn(text=text, speaker=speaker, occurred_at=occurred, event_id=event_id, caption=caption,
                           metadata=metadata), {}


def _bulk_session(raw, index: int = 0, seen: dict | None = None) -> tuple[dict | None, dict]:
    if not isinstance(raw, dict):
        return None, {"non_field_errors": ["Expected an object."]}
    err: dict = {k: ["Unknown field."] for k in raw if k not in _SESSION_FIELDS}
    key = _text_field(raw, "session_key", 200, err, required=True)
    if "session_key" not in err and not key:
        err["session_key"] = ["This field may not be blank."]
    visibility = raw.get("visibility")  # None: the writer's default
    if visibility is not None and visibility not in WRITE_VISIBILITIES:
        err["visibility"] = [f'"{visibility}" is not a valid choice.']
    team_id = raw.get("team_id")
    if team_id is not None and (type(team_id) is not int or team_id < 1):
        err["team_id"] = ["A valid integer is required."]
    end = raw.get("end_session", False)
    if not isinstance(end, bool):
        err["end_session"] = ["Must be a valid boolean."]
    turns_raw = raw.get("turns")
    turns: list[services.TurnIn] = []
    if not isinstance(turns_raw, list) or not turns_raw:
        err["turns"] = ["At least one turn is required." if isinstance(turns_raw, list) or turns_raw is None
                        else "Expected a list of items."]
    else:
        bad = {}
        seen = {} if seen is None else seen
        for i, t in enumerate(turns_raw):
            turn, turn_err = _bulk_turn(t)
            # event_ids are unique per owner, not per session: a clash across sessions drops a turn too
            clash = event_id_clash(seen, (index, i), turn) if turn is not None else None
            if clash:
                (s_at, t_at), what = clash
                first = f"turn {t_at}" if s_at == index else f"session {s_at} turn {t_at}"
                turn_err = {"event_id": [f"Repeats {first}'s event_id with different {what}."]}
            if turn_err:
                bad[str(i)] = turn_err
            else:
                turns.append(turn)
        if bad:
            err["turns"] = bad
    if err:
        return None, err
    return {"session_key": key, "turns": turns, "visibility": visibility, "team_id": team_id,
            "end_session": end}, {}


class BulkSessionsField(serializers.Field):
    """Sessions as in weave-session (``session_key``, ``turns``, ``visibility``, ``team_id``,
    ``end_session``), checked by the same rules in plain Python: a DRF serializer per turn costs
    about 90 µs, as much as writing the row. Errors are keyed by session and turn index."""

    def to_internal_value(self, data) -> list[dict]:
        if not isinstance(data, list):
            raise serializers.ValidationError("Expected a list of sessions.")
        if not data:
            raise serializers.ValidationError("At least one session is required.")
        sessions, errors, turns, seen = [], {}, 0, {}
        for i, raw in enumerate(data):
            session, err = _bulk_session(raw, i, seen)
            if err:
                errors[str(i)] = err
                if len(errors) >= 50:  # enough to fix a file by; the rest is not looked at
                    break
            else:
                sessions.append(session)
                turns += len(session["turns"])
        if errors:
            raise serializers.ValidationError(errors)
        if turns > services.BULK_MAX_TURNS:
            raise serializers.ValidationError(f"More than {services.BULK_MAX_TURNS} turns in one request; split it.")
        return sessions


def bulk_sessions(actor, sessions: list[dict]) -> list[services.SessionIn]:
    """Validated session dicts -> SessionIn, with each ``team_id`` resolved in the actor's org."""
    teams: dict[int, object] = {}
    errors = {}
    out = []
    for i, s in enumerate(sessions):
        team = None
        if s["team_id"] is not None:
            if s["team_id"] not in teams:
                try:
                    teams[s["team_id"]] = team_from_input(actor, s["team_id"])
                except serializers.ValidationError as exc:
                    teams[s["team_id"]] = exc
            team = teams[s["team_id"]]
            if isinstance(team, serializers.ValidationError):
                errors[str(i)] = team.detail
                continue
        out.append(services.SessionIn(session_key=s["session_key"], turns=s["turns"], visibility=s["visibility"],
                                      team=team, end_session=s["end_session"]))
    if errors:
        raise serializers.ValidationError({"sessions": errors})
    return out


class BulkJSONParser(SafeJSONParser):
    """``application/json`` for a bulk body, which is then one JSON array. JSON lines sent under this
    type fail at their second line with the decoder's "Extra data": say which type they need."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except UnstorableBodyText:
            raise
        except ParseError as exc:
            if "Extra data" not in str(exc.detail):
                raise
            raise ParseError(f"{exc.detail}. A body of JSON lines (one session per line) is sent with "
                             "Content-Type: application/x-ndjson; as application/json the body is one JSON "
                             "array of sessions.") from None


class BulkIngestApi(Api):
    """Many sessions in one all-or-nothing write (COPY). Body: the sessions as a JSON array, or as
    JSON lines (``Content-Type: application/x-ndjson``), one weave-session body each; at most
    10,000 turns and the body-size limit (413) per request.

    Leaves get what weave-session gives them (silks, session seq, temporal-next edges, idempotency
    on ``event_id``), but entity and similarity edges and conflict checks are not written before
    the answer: they run in a background task afterwards (``deferred`` lists them; the batch's
    state is at ``GET memories/bulk/{batch_id}``). ``?embed=false`` skips the embedder too: the
    leaves are found by words at once and by meaning once the task has filled their vectors."""

    parser_classes = [BulkJSONParser, JSONLinesParser]

    class InputSerializer(StrictSerializer):
        sessions = BulkSessionsField()

    class QuerySerializer(StrictSerializer):
        embed = serializers.BooleanField(default=True)

    class OutputSerializer(serializers.Serializer):
        batch_id = serializers.IntegerField(allow_null=True)
        node_ids = serializers.ListField(child=serializers.IntegerField())
        created = serializers.IntegerField()
        existing = serializers.IntegerField()
        sessions = serializers.IntegerField()
        edges = serializers.IntegerField()
        embedded = serializers.BooleanField()
        deferred = serializers.ListField(child=serializers.CharField())

    @extend_schema(request=WeaveSessionApi.InputSerializer(many=True), parameters=[QuerySerializer],
                   responses={201: OutputSerializer, 200: OutputSerializer, 409: CHANGED_REPLAY_409},
                   description=REPLAY_CODES + " The 409 refuses the whole request (error.fields: "
                               "sessions.<i>.turns.<j>.event_id for each such turn).")
    def post(self, request):
        q = self.QuerySerializer(data=request.query_params.dict())
        q.is_valid(raise_exception=True)
        sessions = request.data
        if request.stream is None:
            # No body at all: DRF hands over {} whatever the type, which would read "Expected a list
            # of sessions." for an empty JSON-lines file where an empty array says none were given.
            sessions = []
        s = self.InputSerializer(data={"sessions": sessions})
        s.is_valid(raise_exception=True)
        try:
            result = services.bulk_ingest(
                actor=request.actor, sessions=bulk_sessions(request.actor, s.validated_data["sessions"]),
                embed=q.validated_data["embed"], request_id=self.request_id())
        except services.ChangedReplay as exc:
            return _changed_replay(request, exc)
        return _written(self.OutputSerializer(result).data, result.created)


class IngestBatchDetailApi(Api):
    """A bulk write's deferred work, for the actor who wrote it: ``pending`` until its vectors, entity
    and similarity edges are written and its conflict checks queued, then ``done``."""

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        status = serializers.CharField()
        nodes = serializers.SerializerMethodField()
        embed_pending = serializers.BooleanField()
        attempts = serializers.IntegerField()
        error = serializers.CharField()
        created_at = serializers.DateTimeField()
        finished_at = serializers.DateTimeField(allow_null=True)

        def get_nodes(self, b) -> int:
            return len(b.node_ids)

    @extend_schema(responses=OutputSerializer)
    def get(self, request, batch_id: int):
        batch = selectors.ingest_batch_get(actor=request.actor, batch_id=batch_id)
        if batch is None:
            raise Http404
        return Response(self.OutputSerializer(batch).data)
