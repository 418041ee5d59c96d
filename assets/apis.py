"""Assets REST API: assets (versions, lifecycle, promotion), ACL grants, agent bindings, the audit
log and the agent context. Access to one object is decided by ``assets.access``."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import ParseError, PermissionDenied
from rest_framework.parsers import BaseParser
from rest_framework.response import Response

from memory.models import Visibility
from nylon_project.api import (
    Api,
    StrictPatchSerializer,
    StrictSerializer,
    filter_params,
    paginate,
    team_from_input,
)
from nylon_project.pagination import CursorPage
from nylon_project.parsers import SafeJSONParser, UnstorableBodyText
from nylon_project.schema import ErrorResponse
from teams import access as team_access
from teams.access import require_org_admin

from . import access, selectors, services
from .context import Budget, build_context, pick_language
from .models import (
    AccessGrant,
    AgentBinding,
    AssetKind,
    AssetStatus,
    AssetVersion,
    AuditEvent,
    BindingMode,
    GranteeKind,
    GrantTeamRole,
    ObjectType,
    Permission,
)


class AssetOutput(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    title = serializers.CharField()
    summary = serializers.CharField()
    body = serializers.CharField()
    node_ids = serializers.ListField(child=serializers.IntegerField())
    owner = serializers.SerializerMethodField()
    team_id = serializers.IntegerField(allow_null=True)
    visibility = serializers.CharField()
    status = serializers.CharField()
    version = serializers.IntegerField()
    content_hash = serializers.CharField()
    confidence = serializers.FloatField()
    usage_count = serializers.IntegerField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    promotion = serializers.SerializerMethodField(help_text="A pending promotion: its target and who asked "
                                                  "(requested_by; to agent keys an email-named person's "
                                                  "local part).")
    approved_by_id = serializers.IntegerField(allow_null=True)
    approved_at = serializers.DateTimeField(allow_null=True)
    approved_version = serializers.IntegerField(allow_null=True, help_text=(
        "The version an approver last approved; null if never approved."))
    served_version = serializers.SerializerMethodField(help_text=(
        "The version bound agents receive: the approved one, while the asset is approved or a newer version "
        "awaits review (candidate) or was sent back (draft); null when agents receive nothing from it."))
    pending_version = serializers.SerializerMethodField(help_text=(
        "A version newer than the served one, awaiting approval (or sent back to draft); null if none."))
    last_move_note = serializers.SerializerMethodField(help_text="The last lifecycle move's reason, when it gave "
                                                       "one (from, to, note, by, at): a rejected edit's, for its "
                                                       "author.")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def _for_agents(self, d: dict, key: str) -> dict:
        from .context import label_for_agents

        if self.context.get("for_agent") and isinstance(d.get(key), str):
            return {**d, key: label_for_agents(d[key])}
        return d

    def get_promotion(self, a) -> dict:
        return self._for_agents(a.promotion or {}, "requested_by")

    def get_last_move_note(self, a) -> dict:
        return self._for_agents(a.last_move_note or {}, "by")

    def get_served_version(self, a) -> int | None:
        return selectors.served_version(a)

    def get_pending_version(self, a) -> int | None:
        return selectors.pending_version(a)

    def get_owner(self, a) -> dict:
        return {"kind": "agent", "id": a.owner_agent_id} if a.owner_agent_id else {"kind": "user",
                                                                                  "id": a.owner_user_id}


def _written(actor, asset, *, built_on: int | None = None) -> AssetOutput:
    """The answer to a write of the asset: to an agent, the agent view of the reads (an asset it does
    not own as it is served, people named without their email address): a write must not hand an
    ACL writer the edit awaiting review that ``GET assets/{id}`` withholds (``selectors.as_written_by``)."""
    return AssetOutput(selectors.as_written_by(actor, asset, built_on=built_on),
                       context={"for_agent": actor.agent is not None})


class AssetListCreateApi(Api):
    pagination_class = CursorPage

    class InputSerializer(StrictSerializer):
        kind = serializers.ChoiceField(choices=AssetKind.choices)
        title = serializers.CharField(max_length=200)
        summary = serializers.CharField(max_length=300, required=False, allow_blank=True, default="")
        body = serializers.CharField(max_length=100_000, required=False, allow_blank=True, default="",
                                     trim_whitespace=False)
        node_ids = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False,
                                         default=list, max_length=1000)
        visibility = serializers.ChoiceField(choices=Visibility.choices, default=Visibility.PRIVATE)
        team_id = serializers.IntegerField(required=False, allow_null=True, min_value=1, default=None)
        confidence = serializers.FloatField(min_value=0, max_value=1, default=1.0)

    class QueryInput(StrictSerializer):
        kind = serializers.ChoiceField(choices=AssetKind.values, required=False,
                                       error_messages={"invalid_choice": "Unknown value."})
        status = serializers.ChoiceField(choices=AssetStatus.values, required=False,
                                         error_messages={"invalid_choice": "Unknown value."})
        awaiting_approval = serializers.BooleanField(
            required=False, default=False,
            help_text="Only the candidates the caller may approve (a promotion into a team it administers, "
                      "any for an org admin), readable or not by the caller otherwise: the approval queue.")

    @extend_schema(parameters=[QueryInput], responses=AssetOutput(many=True))
    def get(self, request):
        """Pages the assets the caller may read, filtered by kind and status, or with awaiting_approval=true
        the candidates the caller may approve (newest first; a page may hold fewer than its size, as each
        row is decided as the approval itself would be). Any member or agent key; an unknown query
        parameter is a 400."""

        q = self.QueryInput(data=filter_params(request))
        q.is_valid(raise_exception=True)
        actor = request.actor
        d = dict(q.validated_data)
        if d.pop("awaiting_approval"):
            # An approver outside the team reads a candidate promoted into it (access.asset_readable's
            # approver path): the queue is not a subset of the readable list.
            paginator = self.pagination_class()
            page = paginator.paginate_queryset(selectors.approval_candidates(actor).filter(**d), request, view=self)
            mine = [a for a in page if access.can_approve(actor, a)[0]]
            return paginator.get_paginated_response(AssetOutput(selectors.as_read_by(actor, mine), many=True,
                                                                context={"for_agent": False}).data)
        qs = access.readable_assets(actor).filter(selectors.served_to_q(actor))
        if "status" in d:  # the status as the reader is given the asset (to an agent: as served)
            qs = qs.filter(selectors.served_status_q(actor, d.pop("status")))
        qs = qs.filter(**d)
        # An agent is given each asset it does not own as it is served (the approved version), as
        # in its context: paginate() would serialise the rows as they are stored.
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(AssetOutput(selectors.as_read_by(actor, page), many=True,
                                                            context={"for_agent": actor.agent is not None}).data)

    @extend_schema(request=InputSerializer, responses={201: AssetOutput})
    def post(self, request):
        """Creates a draft asset (skill, wiki, persona, scenario, chat memory) owned by the caller, version 1.
        Needs write access; node_ids must name memories the caller may read."""

        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        d = dict(s.validated_data)
        team = team_from_input(request.actor, d.pop("team_id"))
        asset = services.asset_create(actor=request.actor, team=team, request_id=self.request_id(), **d)
        return Response(_written(request.actor, asset).data, status=status.HTTP_201_CREATED)


class AssetDetailApi(Api):
    class UpdateInput(StrictPatchSerializer):
        expected_version = serializers.IntegerField(min_value=1)
        title = serializers.CharField(max_length=200, required=False)
        summary = serializers.CharField(max_length=300, required=False, allow_blank=True)
        body = serializers.CharField(max_length=100_000, required=False, allow_blank=True, trim_whitespace=False)
        node_ids = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False,
                                         max_length=1000)
        visibility = serializers.ChoiceField(choices=Visibility.choices, required=False)
        confidence = serializers.FloatField(min_value=0, max_value=1, required=False)

    @extend_schema(responses=AssetOutput)
    def get(self, request, asset_id: int):
        """One asset, if the caller may read it (else a 404, audited). An agent key is given an asset it does not
        own as it is served: its last approved version (a 404 if it has none), never a newer one awaiting review."""

        asset = access.access_asset_by_id(request.actor, asset_id, for_write=False, as_served=True,
                                          request_id=self.request_id())
        return Response(AssetOutput(asset, context={"for_agent": request.actor.agent is not None}).data)

    @extend_schema(request=UpdateInput, responses={200: AssetOutput, 409: ErrorResponse})
    def patch(self, request, asset_id: int):
        """Changes the asset and makes a new version. expected_version (required) must be its current version,
        else a 409. Its owner, an admin of its scope or an ACL writer may."""

        asset = access.access_asset_by_id(request.actor, asset_id, for_write=True, request_id=self.request_id())
        s = self.UpdateInput(data=request.data)
        s.is_valid(raise_exception=True)
        d = dict(s.validated_data)
        expected = d.pop("expected_version")
        asset, versioned = services.asset_update(actor=request.actor, asset=asset, data=d,
                                                 expected_version=expected, request_id=self.request_id())
        return Response(_written(request.actor, asset, built_on=expected if versioned else None).data)


class AssetVersionOutput(serializers.Serializer):
    version = serializers.IntegerField()
    title = serializers.CharField()
    summary = serializers.CharField()
    body = serializers.CharField()
    node_ids = serializers.ListField(child=serializers.IntegerField())
    content_hash = serializers.CharField()
    author_label = serializers.SerializerMethodField(help_text="Who saved the version (user:<name> or "
                                                     "agent:<name>); to agent keys a name that is an email "
                                                     "address shows its local part only.")
    created_at = serializers.DateTimeField()
    approved_at = serializers.DateTimeField(allow_null=True, help_text=(
        "When an approver approved this version's text; null if it never was (a draft, an edit awaiting "
        "review or sent back)."))

    def get_author_label(self, v) -> str:
        from .context import label_for_agents

        return label_for_agents(v.author_label) if self.context.get("for_agent") else v.author_label


class AssetVersionPage(CursorPage):
    """Keyset pages of one asset's versions, newest first. Keyed on ``version`` (unique per asset),
    not ``id``: an import may create an asset's versions in any order. Each row carries a full body
    of up to 100,000 characters, so pages are smaller than other lists': at most 50 rows (~5 M
    characters) per request, where the unpaged list could build every version of a long history."""

    ordering = "-version"
    page_size = 20
    max_page_size = 50


def _versions_read_by(actor, asset):
    """The versions of ``asset`` (as ``access_asset_by_id(..., as_served=True)`` gave it) this reader may
    read: for an agent that does not own it, the approved ones up to the served one (not the edit awaiting
    review, nor one that was sent back)."""
    return selectors.versions_read_by(actor, asset, AssetVersion.objects.filter(org=actor.org, asset=asset))


class AssetVersionListApi(Api):
    pagination_class = AssetVersionPage

    @extend_schema(responses=AssetVersionOutput(many=True))
    def get(self, request, asset_id: int):
        """Pages the asset's versions, newest first (at most 50 a page: each carries its full body). Readers
        of the asset; an agent key, for an asset it does not own, only the approved versions up to the one it
        is served."""

        asset = access.access_asset_by_id(request.actor, asset_id, for_write=False, as_served=True,
                                          request_id=self.request_id())
        return paginate(self, _versions_read_by(request.actor, asset), AssetVersionOutput,
                        context={"for_agent": request.actor.agent is not None})


class AssetVersionDetailApi(Api):
    @extend_schema(responses=AssetVersionOutput)
    def get(self, request, asset_id: int, version: int):
        """One version of the asset, for readers of the asset; 404 for a version it never had (and, for an agent
        key and an asset it does not own, for one newer than the version it is served or never approved)."""

        asset = access.access_asset_by_id(request.actor, asset_id, for_write=False, as_served=True,
                                          request_id=self.request_id())
        row = _versions_read_by(request.actor, asset).filter(version=version).first()
        if row is None:
            raise Http404
        return Response(AssetVersionOutput(row, context={"for_agent": request.actor.agent is not None}).data)


class AssetTransitionApi(Api):
    class InputSerializer(StrictSerializer):
        to = serializers.ChoiceField(choices=AssetStatus.choices)
        expected_version = serializers.IntegerField(min_value=1, required=False, allow_null=True, default=None,
                                                    help_text="The asset's current version, else a 409. "
                                                              "Required to approve: the version reviewed.")
        note = serializers.CharField(max_length=500, required=False, allow_blank=True, default="",
                                     help_text="Why (a rejection's reason, for the author): kept in the audit "
                                               "entry and shown on the asset's page.")

        def validate(self, attrs):
            # A candidate stays editable by its owner while it waits: an approval that names no
            # version approved (and served) whatever was saved after the approver read it.
            if attrs["to"] == AssetStatus.APPROVED and attrs["expected_version"] is None:
                raise serializers.ValidationError({"expected_version": [
                    "Required to approve: the version you reviewed (a newer one is a 409)."]})
            return attrs

    @extend_schema(request=InputSerializer, responses={200: AssetOutput, 409: ErrorResponse})
    def post(self, request, asset_id: int):
        """Moves the asset along its lifecycle (draft, approved, deprecated, …). Approving needs an approver
        of the target scope, rejecting its owner or an approver, any other move a writer; an illegal move
        is a 400, a stale expected_version a 409. Approving needs expected_version, the version reviewed."""

        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        d = s.validated_data
        asset = services.access_asset_for_transition(request.actor, asset_id, to=d["to"],
                                                     request_id=self.request_id())
        asset = services.asset_transition(actor=request.actor, asset=asset, to=d["to"],
                                          expected_version=d["expected_version"], note=d["note"],
                                          request_id=self.request_id())
        return Response(_written(request.actor, asset).data)


class AssetPromoteApi(Api):
    class InputSerializer(StrictSerializer):
        visibility = serializers.ChoiceField(choices=[Visibility.TEAM, Visibility.ORG])
        team_id = serializers.IntegerField(required=False, allow_null=True, min_value=1, default=None)
        expected_version = serializers.IntegerField(min_value=1, required=False, allow_null=True, default=None)

    @extend_schema(request=InputSerializer, responses={200: AssetOutput, 409: ErrorResponse})
    def post(self, request, asset_id: int):
        """Proposes widening a draft asset to its team or the org, for an approver to approve. The owner only;
        a non-draft is a 400, a stale expected_version a 409."""

        asset = access.access_asset_by_id(request.actor, asset_id, for_write=True, request_id=self.request_id())
        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        d = s.validated_data
        asset = services.asset_promote(actor=request.actor, asset=asset, visibility=d["visibility"],
                                       team=team_from_input(request.actor, d["team_id"]),
                                       expected_version=d["expected_version"], request_id=self.request_id())
        return Response(_written(request.actor, asset).data)


# --- ACL ---------------------------------------------------------------------------------------------


class GrantOutput(serializers.Serializer):
    id = serializers.IntegerField()
    object_type = serializers.CharField()
    object_id = serializers.IntegerField()
    grantee_kind = serializers.CharField()
    grantee_user_id = serializers.IntegerField(allow_null=True)
    grantee_agent_id = serializers.IntegerField(allow_null=True)
    grantee_team_id = serializers.IntegerField(allow_null=True)
    grantee_team_role = serializers.CharField()
    permission = serializers.CharField()
    granted_by_id = serializers.IntegerField(allow_null=True)
    granted_by_label = serializers.SerializerMethodField(help_text=(
        "Who granted it (user:<name> or agent:<name>); to agent keys a name that is an email address "
        "shows its local part only."))
    created_at = serializers.DateTimeField()

    def get_granted_by_label(self, g) -> str:
        from .context import label_for_agents

        return label_for_agents(g.granted_by_label) if self.context.get("for_agent") else g.granted_by_label


class GrantListCreateApi(Api):
    pagination_class = CursorPage

    class InputSerializer(StrictSerializer):
        object_type = serializers.ChoiceField(choices=ObjectType.choices)
        object_id = serializers.IntegerField(min_value=1)
        grantee_kind = serializers.ChoiceField(choices=GranteeKind.choices)
        user_id = serializers.IntegerField(min_value=1, required=False, allow_null=True, default=None)
        agent_id = serializers.IntegerField(min_value=1, required=False, allow_null=True, default=None)
        team_id = serializers.IntegerField(min_value=1, required=False, allow_null=True, default=None)
        team_role = serializers.ChoiceField(choices=GrantTeamRole.choices, required=False, default="member")
        permission = serializers.ChoiceField(choices=Permission.choices, default=Permission.READ)

        GRANTEE_ID = {GranteeKind.USER: "user_id", GranteeKind.AGENT: "agent_id", GranteeKind.TEAM_ROLE: "team_id"}

        def validate(self, attrs):
            # Each grantee kind is named by one id; an id of another kind would be silently dropped.
            own = self.GRANTEE_ID[attrs["grantee_kind"]]
            errors = {name: [f'Not used for grantee_kind "{attrs["grantee_kind"]}": give only {own}.']
                      for name in self.GRANTEE_ID.values() if name != own and attrs.get(name) is not None}
            if attrs["grantee_kind"] != GranteeKind.TEAM_ROLE and "team_role" in self.initial_data:
                errors["team_role"] = [f'Not used for grantee_kind "{attrs["grantee_kind"]}": only for team_role.']
            if attrs.get(own) is None:
                errors[own] = ["This field is required."]
            if errors:
                raise serializers.ValidationError(errors)
            return attrs

    class QueryInput(StrictSerializer):
        object_type = serializers.ChoiceField(choices=ObjectType.choices)
        object_id = serializers.IntegerField(min_value=1)

    @extend_schema(parameters=[QueryInput], responses=GrantOutput(many=True))
    def get(self, request):
        """Pages the ACL grants of one restricted node or asset (object_type and object_id are required). Its
        owner or an org admin."""

        q = self.QueryInput(data=filter_params(request))
        q.is_valid(raise_exception=True)
        d = q.validated_data
        obj, _ = services.acl_object_for_admin(request.actor, d["object_type"], d["object_id"],
                                               request_id=self.request_id(), new_grant=False)
        qs = AccessGrant.objects.filter(org=request.actor.org, object_type=d["object_type"], object_id=obj.id)
        return paginate(self, qs, GrantOutput, context={"for_agent": request.actor.agent is not None})

    @extend_schema(request=InputSerializer, responses={201: GrantOutput})
    def post(self, request):
        """Grants a user, an agent or a team role read or write access to a restricted node or asset: give the
        one id of grantee_kind. Its owner or an org admin (an admin's grant to itself is audited); a second
        grant to the same grantee is a 400."""

        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        d = dict(s.validated_data)
        obj, reason = services.acl_object_for_admin(request.actor, d["object_type"], d["object_id"],
                                                    request_id=self.request_id())
        d.pop("object_id")
        grant = services.grant_create(actor=request.actor, obj=obj, reason=reason, request_id=self.request_id(),
                                      **d)
        return Response(GrantOutput(grant, context={"for_agent": request.actor.agent is not None}).data,
                        status=status.HTTP_201_CREATED)


class GrantDetailApi(Api):
    @extend_schema(responses={204: None})
    def delete(self, request, grant_id: int):
        """Revokes the ACL grant. The object's owner or an org admin."""

        grant = services.grant_get_for_admin(request.actor, grant_id, request_id=self.request_id())
        services.grant_revoke(actor=request.actor, grant=grant, request_id=self.request_id())
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- bindings ----------------------------------------------------------------------------------------


class BindingOutput(serializers.Serializer):
    id = serializers.IntegerField()
    agent_id = serializers.IntegerField()
    asset_id = serializers.IntegerField()
    asset_kind = serializers.CharField(source="asset.kind")
    asset_title = serializers.SerializerMethodField(help_text=(
        "The asset's title. To the agent's own key, the title of the version it is served (an edit awaiting "
        "review is not named), null when it receives nothing from the asset."))
    mode = serializers.CharField()
    priority = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    served = serializers.SerializerMethodField(help_text=(
        "Whether the agent receives anything from this binding: only an asset's approved version is served, "
        "so a binding of a draft or candidate never approved gives nothing until it is approved; nor does one "
        "of an asset whose visibility no longer includes the agent."))
    served_version = serializers.SerializerMethodField(help_text="The asset version the agent is served, or null.")
    note = serializers.SerializerMethodField(help_text=(
        "Why the agent receives nothing, or an older version than the asset's current one; empty otherwise "
        "(to the agent's own key, empty when a newer version awaits review)."))

    def _serving(self, b) -> tuple[int | None, str]:
        if not hasattr(b, "_serving"):  # one eligibility check for the three fields
            b._serving = selectors.binding_serving(b)
        return b._serving

    def get_asset_title(self, b) -> str | None:
        if self.context.get("reader") is None:
            return b.asset.title
        return self.context["titles"].get(b.asset_id)  # selectors.titles_read_by

    def get_served(self, b) -> bool:
        return self._serving(b)[0] is not None

    def get_served_version(self, b) -> int | None:
        return self._serving(b)[0]

    def get_note(self, b) -> str:
        # To the agent itself, an asset it does not own as GET assets/{id} shows it: what it is
        # served, not that a newer version awaits review (nor that version's number).
        reader = self.context.get("reader")
        version, note = self._serving(b)
        if (reader is not None and selectors.reads_served(reader, b.asset) and selectors.pending_version(b.asset)
                and version is not None):
            return ""  # only the note of a version awaiting review; why nothing is served stays said
        return note


class AgentBindingListApi(Api):
    class InputSerializer(StrictSerializer):
        asset_id = serializers.IntegerField(min_value=1)
        mode = serializers.ChoiceField(choices=BindingMode.choices, default=BindingMode.FULL)
        priority = serializers.IntegerField(min_value=0, max_value=10_000, default=100)

    @extend_schema(responses=inline_serializer("BindingList", {"results": BindingOutput(many=True)}))
    def get(self, request, agent_id: int):
        """The assets bound to the agent (injected into its context), by priority. The agent itself, org
        admins and admins of the agent's team."""

        agent = team_access.access_agent_by_id(request.actor, agent_id, for_write=False)
        if not (request.actor.agent is not None and request.actor.agent.id == agent.id):
            services.require_binding_admin(request.actor, agent)
        rows = list(AgentBinding.objects.filter(org=request.actor.org, agent=agent).select_related("asset", "agent")
                    .order_by("priority", "asset_id"))
        context = {}
        if request.actor.agent is not None:  # the agent itself: titles as GET assets/{id} gives them
            context = {"reader": request.actor,
                       "titles": selectors.titles_read_by(request.actor, [b.asset for b in rows])}
        return Response({"results": BindingOutput(rows, many=True, context=context).data})

    @extend_schema(request=InputSerializer, responses={201: BindingOutput, 200: BindingOutput})
    def post(self, request, agent_id: int):
        """Binds an asset to the agent (201), or changes the mode and priority of its binding (200). Org admins
        and admins of the agent's team; an asset the agent may not read is a 400 (bindings never widen access).
        Only approved versions are served: served and note say what the agent receives."""

        agent = team_access.access_agent_by_id(request.actor, agent_id, for_write=False)
        services.require_binding_admin(request.actor, agent)
        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        d = s.validated_data
        try:
            asset = access.access_asset_by_id(request.actor, d["asset_id"], for_write=False,
                                              request_id=self.request_id())
        except Http404:
            raise serializers.ValidationError({"asset_id": ["No such asset."]}) from None
        b = services.binding_set(actor=request.actor, agent=agent, asset=asset, mode=d["mode"],
                                 priority=d["priority"], request_id=self.request_id())
        return Response(BindingOutput(b).data, status=status.HTTP_201_CREATED if b.was_created else status.HTTP_200_OK)


class AgentBindingDetailApi(Api):
    @extend_schema(responses={204: None})
    def delete(self, request, agent_id: int, binding_id: int):
        """Unbinds the asset from the agent. Org admins and admins of the agent's team."""

        agent = team_access.access_agent_by_id(request.actor, agent_id, for_write=False)
        services.binding_remove(actor=request.actor, agent=agent, binding_id=binding_id,
                                request_id=self.request_id())
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- audit -------------------------------------------------------------------------------------------


class AuditOutput(serializers.Serializer):
    id = serializers.IntegerField()
    actor_kind = serializers.CharField()
    actor_id = serializers.IntegerField(allow_null=True)
    actor_label = serializers.CharField()
    action = serializers.CharField()
    object_type = serializers.CharField()
    object_id = serializers.CharField()
    outcome = serializers.CharField()
    reason = serializers.CharField()
    detail = serializers.DictField()
    request_id = serializers.CharField()
    created_at = serializers.DateTimeField()


class AuditListApi(Api):
    """Read-only, org admins only (agents are refused)."""

    pagination_class = CursorPage

    class QueryInput(StrictSerializer):
        action = serializers.CharField(required=False, max_length=64)
        actor = serializers.CharField(required=False, max_length=255, help_text="actor label, e.g. user:ana")
        actor_kind = serializers.ChoiceField(choices=["user", "agent", "system"], required=False)
        actor_id = serializers.IntegerField(required=False)
        outcome = serializers.ChoiceField(choices=AuditEvent.Outcome.choices, required=False)
        object_type = serializers.CharField(required=False, max_length=64)
        object_id = serializers.CharField(required=False, max_length=64)

    @extend_schema(parameters=[QueryInput], responses=AuditOutput(many=True))
    def get(self, request):
        """Pages the organisation's audit log (accesses, denials, changes), newest first, filtered by the
        query parameters. Org admins only; agents are refused."""

        if request.actor.agent is not None:
            raise PermissionDenied("Agents may not read the audit log.")
        require_org_admin(request.actor, action="read the audit log")
        q = self.QueryInput(data=filter_params(request))
        q.is_valid(raise_exception=True)
        d = q.validated_data
        qs = AuditEvent.objects.filter(org=request.actor.org)
        mapping = {"action": "action", "actor": "actor_label", "actor_kind": "actor_kind", "actor_id": "actor_id",
                   "outcome": "outcome", "object_type": "object_type", "object_id": "object_id"}
        for k, col in mapping.items():
            if k in d:
                qs = qs.filter(**{col: d[k]})
        return paginate(self, qs, AuditOutput)


# --- context -----------------------------------------------------------------------------------------


def _budget_field(name: str, what: str) -> serializers.IntegerField:
    return serializers.IntegerField(min_value=1, required=False, help_text=(
        f"{what}: default {getattr(Budget, name)}; above {Budget.HARD[name]} counts as {Budget.HARD[name]}."))


class BudgetInput(StrictSerializer):
    """Limits of the assembled context, each a whole number. A typed object rather than a free dict:
    a wrong value is named by its key, and the keys are in the schema (Budget.HARD lists them)."""

    max_chars_per_asset = _budget_field("max_chars_per_asset", "Characters of one bound asset's body")
    max_stable_chars = _budget_field("max_stable_chars", "Characters of the stable part (the bound assets)")
    max_index_entries = _budget_field("max_index_entries", "Entries of the scenario index")
    max_chars_per_index_line = _budget_field("max_chars_per_index_line", "Characters of one index line")
    max_chars_per_memory = _budget_field("max_chars_per_memory", "Characters of one recalled memory")
    max_recall_chars = _budget_field("max_recall_chars", "Characters of all recalled memories together")
    max_recall_items = _budget_field("max_recall_items", "Recalled memories (k raises the default to k)")


class ContextApi(Api):
    read_methods = ("POST",)  # building context reads memory; read-only keys may call it
    class QueryInput(StrictSerializer):
        query = serializers.CharField(max_length=4000, required=False, allow_blank=True, default="")
        k = serializers.IntegerField(min_value=1, max_value=20, required=False, allow_null=True, default=None)
        reinforce = serializers.BooleanField(default=True)

    class InputSerializer(QueryInput):
        budget = BudgetInput(required=False)

    def _answer(self, request, s: serializers.Serializer):
        if request.actor.agent is None:
            raise PermissionDenied("Context is assembled for agents: authenticate with an agent key.")
        s.is_valid(raise_exception=True)
        d = s.validated_data
        overrides = dict(d.get("budget", {}))
        if d["k"] is not None:
            # k (≤ 20) asks for that many hits: it raises the default max_recall_items (5), which
            # would otherwise silently cut it; an explicit max_recall_items still bounds it.
            overrides.setdefault("max_recall_items", d["k"])
        result = build_context(actor=request.actor, query=d["query"],
                               language=pick_language(request.headers.get("Accept-Language")),
                               budget=Budget.with_overrides(overrides), k=d["k"], reinforce=d["reinforce"])
        resp = Response(result.as_dict())
        resp["Content-Language"] = result.language
        resp["Vary"] = "Accept-Language"
        return resp

    @extend_schema(parameters=[QueryInput], responses=dict)
    def get(self, request):
        """The context an agent injects before answering: its bound assets, a scenario index and the memories
        recalled for query, in the Accept-Language language. Agent keys only (read keys may call it); an
        unknown query parameter is a 400."""

        return self._answer(request, self.QueryInput(data=request.query_params.dict()))

    @extend_schema(request=InputSerializer, responses=dict)
    def post(self, request):
        """As GET, with limits on its parts in budget (each key documented there). Agent keys only (read keys may call it); budget
        values must be whole numbers."""

        return self._answer(request, self.InputSerializer(data=request.data))


# --- export / import ---------------------------------------------------------------------------------


class ExportApi(Api):
    """JSONL of the org's memory for org admins: exactly what the admin may read."""

    @extend_schema(responses={(200, "application/x-ndjson"): OpenApiResponse(
        OpenApiTypes.STR, description="JSON lines: a header, then node, edge, asset and asset_version rows.")})
    def get(self, request):
        from django.http import StreamingHttpResponse

        from . import audit
        from .porting import export_lines

        if request.actor.agent is not None:
            raise PermissionDenied("Agents may not export the organisation's memory.")
        require_org_admin(request.actor, action="export the organisation's memory")
        audit.record(actor=request.actor, action="org.export", object_type="org", object_id=request.actor.org.id,
                     request_id=self.request_id())
        lines = export_lines(request.actor.org, actor=request.actor)
        resp = StreamingHttpResponse((line + "\n" for line in lines), content_type="application/x-ndjson")
        resp["Content-Disposition"] = f'attachment; filename="{request.actor.org.slug}-memory.jsonl"'
        return resp


class ImportLinesParser(BaseParser):
    """The export file itself (``Content-Type: application/x-ndjson``), as ``GET export`` answers it:
    the body is the ``jsonl`` field. Before, only ``{"jsonl": "<the file>"}`` was taken, and the
    file posted as it was got a 415."""

    media_type = "application/x-ndjson"

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        try:
            return {"jsonl": raw.decode("utf-8")}
        except UnicodeDecodeError:
            raise ParseError("Request body is not valid UTF-8.") from None


class ImportJSONParser(SafeJSONParser):
    """``application/json``: ``{"jsonl": "<the file>"}``. The file itself sent under this type fails
    at its second line with the decoder's "Extra data": say which type it needs."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except ParseError as exc:
            if "Extra data" not in str(exc.detail) or isinstance(exc, UnstorableBodyText):
                raise
            raise ParseError(f"{exc.detail}. Post the export file itself with Content-Type: "
                             "application/x-ndjson, or as application/json {\"jsonl\": \"<the file>\"}.") from None


class ImportApi(Api):
    """Up to ``NYLON_MAX_IMPORT_BYTES`` (64 MiB) a request, where other requests have 2 MiB; a larger
    org moves with ``manage.py export_memory`` / ``import_memory``."""

    parser_classes = [ImportJSONParser, ImportLinesParser]

    class InputSerializer(StrictSerializer):
        jsonl = serializers.CharField(trim_whitespace=False)

    @extend_schema(request=InputSerializer, responses={(201, 200): inline_serializer("ImportCounts", {
        **{k: serializers.IntegerField() for k in ("node", "edge", "asset", "asset_version", "skipped", "unowned")},
        "missing": serializers.ListField(child=serializers.CharField(), help_text=(
            "Owners and teams the file names that this organisation does not have (\"agent:name\", "
            "\"user:name\", \"team:slug\"); their rows were skipped (counted in unowned)."))})})
    def post(self, request):
        """Imports a JSONL export into the organisation in one transaction: any bad line imports nothing and
        is a 400 naming the line. 201 when it created something, 200 when every row was already there
        (skipped). Org admins only; agents are refused."""

        import json

        from django.core.exceptions import ValidationError as DjangoValidationError
        from django.db import DataError, IntegrityError

        from .porting import ImportInvalid, import_lines

        if request.actor.agent is not None:
            raise PermissionDenied("Agents may not import into the organisation's memory.")
        require_org_admin(request.actor, action="import into the organisation's memory")
        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        try:
            # Lines end at "\n" only, as in the file: str.splitlines() also breaks at U+2028, U+0085 and
            # the like, which an export keeps raw inside its JSON strings (ensure_ascii=False), so a
            # memory holding one split its row in two and every later line number was off.
            counts = import_lines(request.actor.org, s.validated_data["jsonl"].split("\n"), actor=request.actor)
        except ImportInvalid as exc:  # checked before writing: every bad line (up to 50), by column
            raise serializers.ValidationError({"jsonl": [
                f"line {line}: {col}: {msg}" for line, cols in exc.errors.items()
                for col, msgs in cols.items() for msg in msgs]}) from None
        except (ValueError, TypeError, KeyError, json.JSONDecodeError, DataError, IntegrityError,
                DjangoValidationError) as exc:
            # the import is one transaction: a bad line anywhere imports nothing
            text = "; ".join(exc.messages) if isinstance(exc, DjangoValidationError) else str(exc)
            raise serializers.ValidationError({"jsonl": [text.splitlines()[0][:200] if text else
                                                         type(exc).__name__]}) from None
        # 200 when nothing was created (a re-import of the same file skips every row), as a replayed weave
        created = any(counts.get(k) for k in ("node", "edge", "asset", "asset_version"))
        return Response(counts, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class NodeGovernanceApi(Api):
    """The five questions of a memory: provenance, lineage, conflicts and validity, change rights,
    degraded dependencies. (Why it was recalled is in each resonate hit's explanation.)"""

    @extend_schema(responses=dict)
    def get(self, request, node_id: int):
        """The five questions of a memory: provenance, lineage, conflicts and validity, change rights and
        degraded dependencies. Readers of the node (else a 404)."""

        from .governance import node_governance

        node = access.access_node(request.actor, node_id, for_write=False, request_id=self.request_id())
        return Response(node_governance(actor=request.actor, node=node))
