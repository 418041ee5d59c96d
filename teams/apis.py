"""Tenancy REST API: /api/v1/org, teams, members and invitations, agents, keys."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from nylon_project.api import Api, StrictPatchSerializer, StrictSerializer, paginate, team_from_input
from nylon_project.errors import ServiceUnavailable, error_body
from nylon_project.pagination import CursorPage
from nylon_project.schema import ErrorResponse

from . import access, selectors, services
from .models import AGENT_DEFAULT_VISIBILITIES, ApiKey, InvitationStatus, Role, Scope, TeamRole


class OrgOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    slug = serializers.CharField()
    created_at = serializers.DateTimeField()


class PingApi(Api):
    """Authenticated no-op: the API's own stack (authentication, scope check, throttle, JSON
    rendering) with no work behind it — the baseline write latencies are compared against
    (bench/ingest_bench.py)."""

    class OutputSerializer(serializers.Serializer):
        ok = serializers.BooleanField()

    @extend_schema(responses=OutputSerializer)
    def get(self, request):
        return Response({"ok": True})


class OrgCurrentApi(Api):
    class InputSerializer(StrictPatchSerializer):
        name = serializers.CharField(max_length=200)

    class OutputSerializer(OrgOutput):
        actor = serializers.SerializerMethodField()

        def get_actor(self, org) -> dict:
            actor = self.context["actor"]
            return {"kind": actor.kind, "id": actor.id, "label": actor.label, "role": actor.role,
                    "scopes": sorted(actor.scopes), "team_ids": sorted(actor.team_ids)}

    @extend_schema(responses=OutputSerializer)
    def get(self, request):
        """The organisation the request acts in, and who the caller is in it (role, scopes, teams). Any member
        or agent key."""

        return Response(self.OutputSerializer(request.org, context={"actor": request.actor}).data)

    @extend_schema(request=InputSerializer, responses=OutputSerializer)
    def patch(self, request):
        """Renames the organisation. Org admins only (403 otherwise); name is required."""

        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        org = services.organization_update(actor=request.actor, request_id=self.request_id(), **s.validated_data)
        return Response(self.OutputSerializer(org, context={"actor": request.actor}).data)


class TeamOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    slug = serializers.CharField()
    description = serializers.CharField()
    created_at = serializers.DateTimeField()


class TeamInput(StrictSerializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(max_length=2000, required=False, allow_blank=True)


class TeamListCreateApi(Api):
    pagination_class = CursorPage

    @extend_schema(responses=TeamOutput(many=True))
    def get(self, request):
        """Pages the organisation's teams. Any member or agent key."""

        return paginate(self, selectors.team_list(actor=request.actor), TeamOutput)

    @extend_schema(request=TeamInput, responses={201: TeamOutput})
    def post(self, request):
        """Creates a team. Org admins only; a name equal to another team's after trimming and case-folding is
        a 400 on name."""

        s = TeamInput(data=request.data)
        s.is_valid(raise_exception=True)
        team = services.team_create(actor=request.actor, request_id=self.request_id(), **s.validated_data)
        return Response(TeamOutput(team).data, status=status.HTTP_201_CREATED)


class TeamDetailApi(Api):
    class UpdateInput(TeamInput):
        name = serializers.CharField(max_length=200, required=False)

    @extend_schema(responses=TeamOutput)
    def get(self, request, team_id: int):
        """One team of the organisation (404 for another org's)."""

        return Response(TeamOutput(access.access_team_by_id(request.actor, team_id, for_write=False)).data)

    @extend_schema(request=UpdateInput, responses=TeamOutput)
    def patch(self, request, team_id: int):
        """Changes a team's name or description. Org admins and the team's admins; a name clashing with
        another team's is a 400."""

        team = access.access_team_by_id(request.actor, team_id, for_write=True)
        s = self.UpdateInput(data=request.data)
        s.is_valid(raise_exception=True)
        team = services.team_update(actor=request.actor, team=team, data=s.validated_data,
                                   request_id=self.request_id())
        return Response(TeamOutput(team).data)

    class DeleteInput(StrictSerializer):
        memories = serializers.ChoiceField(
            choices=services.TEAM_DELETE_CHOICES, required=False,
            help_text="What becomes of the memories and assets shared with the team (required while there are "
                      "any): move (to to_team_id) or private (each private to its writer).")
        to_team_id = serializers.IntegerField(required=False, help_text="With memories=move: the team taking "
                                                                        "them over (another team of the org).")

    class DeleteOutput(serializers.Serializer):
        team = serializers.DictField(help_text="The deleted team: id, name.")
        memories = serializers.CharField(allow_null=True)
        to_team = serializers.DictField(allow_null=True, help_text="id, name; with memories=move.")
        nodes = serializers.DictField(child=serializers.IntegerField(),
                                      help_text="shared: the memories that were shared with the team (moved or "
                                                "made private); other: memories of another visibility that "
                                                "named it (moved, or the team label removed).")
        assets = serializers.DictField(child=serializers.IntegerField(), help_text="As nodes, for assets.")
        agents = serializers.ListField(child=serializers.DictField(),
                                       help_text="The team's agents, now in no team: id, name, default_visibility "
                                                 "(private where it was team) and previous_default_visibility.")
        grants_removed = serializers.IntegerField(help_text="ACL grants to the team's roles, removed.")
        withdrawn_promotions = serializers.ListField(child=serializers.IntegerField(),
                                                     help_text="Candidates promoted to the team, back to draft.")

    @extend_schema(parameters=[DeleteInput], responses={200: DeleteOutput, 400: ErrorResponse, 409: ErrorResponse})
    def delete(self, request, team_id: int):
        """Deletes the team, in one transaction with everything that named it. Org admins only.

        While memories or assets are shared with the team, a choice is required (409 team_not_empty, with the
        counts in error.counts, otherwise): memories=move&to_team_id=<id> hands them to another team of the org,
        memories=private makes each private to its writer. The team's agents leave it; those whose writes
        defaulted to the team now default to private. The answer says what was done."""

        team = access.access_team_by_id(request.actor, team_id, for_write=True)
        s = self.DeleteInput(data=request.query_params.dict())
        s.is_valid(raise_exception=True)
        to_team = None
        if "to_team_id" in s.validated_data:
            try:
                to_team = access.access_team_by_id(request.actor, s.validated_data["to_team_id"], for_write=False)
            except Http404:
                raise serializers.ValidationError({"to_team_id": ["No such team."]}) from None
        try:
            result = services.team_delete(actor=request.actor, team=team, memories=s.validated_data.get("memories"),
                                          to_team=to_team, request_id=self.request_id())
        except services.TeamNotEmpty as exc:
            # The error shape carries fields only for 400s; this 409 names the choice to make, and
            # counts what it is about for a client to show (error.counts: memories, assets).
            body = error_body(exc.default_code, str(exc.detail), fields=exc.fields, request=request)
            body["error"]["counts"] = exc.counts
            return Response(body, status=exc.status_code)
        return Response(result.as_dict())


def _shown_username(user, context: dict) -> str:
    """The username, but to an agent not an email address: accounts made by accepting an invitation
    are named by their email, which agents are not handed (``MemberOutput.email``)."""
    if context.get("for_agent") and "@" in user.username:
        return f"user:{user.pk}"
    return user.username


class TeamMemberOutput(serializers.Serializer):
    id = serializers.IntegerField()
    user_id = serializers.IntegerField()
    username = serializers.SerializerMethodField()
    role = serializers.CharField()

    def get_username(self, tm) -> str:
        return _shown_username(tm.user, self.context)


class TeamMemberListApi(Api):
    pagination_class = CursorPage

    class InputSerializer(StrictSerializer):
        user_id = serializers.IntegerField(min_value=1)
        role = serializers.ChoiceField(choices=TeamRole.choices, default=TeamRole.MEMBER)

    @extend_schema(responses=TeamMemberOutput(many=True))
    def get(self, request, team_id: int):
        """Pages the team's members with their team role. Any member or agent key."""

        team = access.access_team_by_id(request.actor, team_id, for_write=False)
        return paginate(self, selectors.team_member_list(actor=request.actor, team=team), TeamMemberOutput,
                        context={"for_agent": request.actor.agent is not None})

    @extend_schema(request=InputSerializer, responses={201: TeamMemberOutput, 200: TeamMemberOutput},
                   description="Adds the user to the team (201), or sets the team role of an existing "
                   "member (200).")
    def post(self, request, team_id: int):
        team = access.access_team_by_id(request.actor, team_id, for_write=True)
        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        tm, created = services.team_member_put(actor=request.actor, team=team, request_id=self.request_id(),
                                               **s.validated_data)
        return Response(TeamMemberOutput(tm).data,
                        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class TeamMemberDetailApi(Api):
    @extend_schema(responses={204: None})
    def delete(self, request, team_id: int, user_id: int):
        """Removes the user from the team. Org admins and the team's admins (an org owner or admin only by org
        admins); 404 if the user is not in the team."""

        team = access.access_team_by_id(request.actor, team_id, for_write=True)
        if not services.team_member_remove(actor=request.actor, team=team, user_id=user_id,
                                           request_id=self.request_id()):
            raise Http404
        return Response(status=status.HTTP_204_NO_CONTENT)


class MemberOutput(serializers.Serializer):
    user_id = serializers.IntegerField()
    username = serializers.SerializerMethodField(help_text="For agent keys, an account named by its email "
                                                 "address (an accepted invitation) is shown as user:<id>.")
    email = serializers.SerializerMethodField(help_text="Null for agent keys: people's addresses are not "
                                              "handed to agents (a leaked key or an injected prompt would "
                                              "read the whole org's).")
    role = serializers.CharField()
    created_at = serializers.DateTimeField()

    def get_username(self, membership) -> str:
        return _shown_username(membership.user, self.context)

    def get_email(self, membership) -> str | None:
        return None if self.context.get("for_agent") else membership.user.email


class InvitationOutput(serializers.Serializer):
    """An invitation as the admins see it: the email as it was typed, never an account's username
    (that would tell any admin who owns an email address, and its login name)."""

    id = serializers.IntegerField()
    email = serializers.EmailField()
    role = serializers.CharField()
    status = serializers.ChoiceField(choices=InvitationStatus.choices)
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()


class InvitationCreatedOutput(InvitationOutput):
    invite_url = serializers.URLField(allow_null=True, help_text="The link the invitee opens to accept, for "
                                      "the admin to pass on. Shown once; only its hash is stored. Null when "
                                      "mail is configured: the link is then only in the email.")
    emailed = serializers.BooleanField(help_text="The link is mailed to the invitee (after commit).")


class MemberListApi(Api):
    pagination_class = CursorPage

    class InputSerializer(StrictSerializer):
        email = serializers.EmailField()
        role = serializers.ChoiceField(choices=Role.choices, default=Role.MEMBER)

    @extend_schema(responses=MemberOutput(many=True))
    def get(self, request):
        """Pages the organisation's members with their role. Any member or agent key (agents get no
        email addresses)."""

        return paginate(self, selectors.member_list(actor=request.actor), MemberOutput,
                        context={"for_agent": request.actor.agent is not None})

    @extend_schema(request=InputSerializer, responses={201: InvitationCreatedOutput, 503: ErrorResponse},
                   description="Invites the email with the role: nobody becomes a member until the invitee "
                   "opens invite_url and accepts (an existing account signs in, a new email sets a "
                   "password). Inviting an email again revokes its open invitation and issues a new link. "
                   "The answer is the same whether an account has the email or not; an account that is "
                   "already a member is a 400 on email. When mail is configured the link is only emailed "
                   "(invite_url null, emailed true), so admins never hold links to other people's addresses. "
                   "An org issues at most NYLON_INVITES_PER_HOUR (100) invitations in any hour, resends "
                   "included: past it a 429 with Retry-After.")
    def post(self, request):
        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        invitation, url = services.member_invite(actor=request.actor, base_url=request.build_absolute_uri("/"),
                                                 request_id=self.request_id(), **s.validated_data)
        if url is None and services.invitation_mail_failed(invitation):
            raise ServiceUnavailable("The invitation email could not be sent, so no invitation was issued; "
                                     "try again later.")
        data = dict(InvitationOutput(invitation).data)
        data["invite_url"], data["emailed"] = url, url is None
        return Response(data, status=status.HTTP_201_CREATED)


class InvitationListApi(Api):
    pagination_class = CursorPage

    @extend_schema(responses=InvitationOutput(many=True), description="The org's pending invitations "
                   "(neither accepted, revoked nor expired). Org admins only.")
    def get(self, request):
        access.require_org_admin(request.actor, action="manage invitations")
        return paginate(self, selectors.invitation_pending_list(actor=request.actor), InvitationOutput)


class InvitationDetailApi(Api):
    @extend_schema(responses={204: None, 400: ErrorResponse},
                   description="Revokes the invitation: its link stops working (already revoked: no change). "
                   "An accepted invitation is a 400; remove the member instead.")
    def delete(self, request, invitation_id: int):
        invitation = access.access_invitation_by_id(request.actor, invitation_id)
        services.invitation_revoke(actor=request.actor, invitation=invitation, request_id=self.request_id())
        return Response(status=status.HTTP_204_NO_CONTENT)


class MemberDetailApi(Api):
    class InputSerializer(StrictPatchSerializer):
        role = serializers.ChoiceField(choices=Role.choices)

    @extend_schema(responses=MemberOutput)
    def get(self, request, user_id: int):
        """One member of the organisation (404 for a user who is not one)."""

        return Response(MemberOutput(access.access_membership_by_user_id(request.actor, user_id, for_write=False),
                                     context={"for_agent": request.actor.agent is not None}).data)

    @extend_schema(request=InputSerializer, responses=MemberOutput)
    def patch(self, request, user_id: int):
        """Sets the member's role. Org admins only, and only owners grant or remove the owner role; the last
        owner cannot be demoted (400)."""

        m = access.access_membership_by_user_id(request.actor, user_id, for_write=True)
        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        m = services.member_set_role(actor=request.actor, membership=m, role=s.validated_data["role"],
                                     request_id=self.request_id())
        return Response(MemberOutput(m).data)

    @extend_schema(responses={204: None})
    def delete(self, request, user_id: int):
        """Removes the user from the organisation. Org admins only; the last owner cannot be removed (400)."""

        m = access.access_membership_by_user_id(request.actor, user_id, for_write=True)
        services.member_remove(actor=request.actor, membership=m, request_id=self.request_id())
        return Response(status=status.HTTP_204_NO_CONTENT)


class AgentOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    description = serializers.CharField()
    team_id = serializers.IntegerField(allow_null=True)
    is_active = serializers.BooleanField()
    default_visibility = serializers.CharField(
        help_text="What the agent's writes get when they name no visibility: private, team or org.")
    created_at = serializers.DateTimeField()


class AgentChangeOutput(AgentOutput):
    keys_revoked = serializers.IntegerField(
        help_text="API keys this request revoked: deactivating an agent (is_active false, or DELETE) revokes every "
                  "live key of it for good; re-activating the agent does not bring them back (create a new key).")
    live_keys = serializers.IntegerField(help_text="The agent's keys that still authenticate after this request.")


def _live_key_ids(agent) -> set[int]:
    return set(ApiKey.objects.filter(org_id=agent.org_id, agent=agent, revoked_at__isnull=True)
               .values_list("id", flat=True))


def _changed_agent(agent, live_before: set[int]) -> dict:
    """The agent as AgentChangeOutput: with the keys the change revoked, which only the console's confirm
    dialog used to say (a re-activated agent's old key then answered 401 with no word why)."""
    live = _live_key_ids(agent)
    return {**AgentOutput(agent).data, "keys_revoked": len(live_before - live), "live_keys": len(live)}


class AgentListCreateApi(Api):
    pagination_class = CursorPage

    class InputSerializer(StrictSerializer):
        name = serializers.CharField(max_length=200)
        description = serializers.CharField(max_length=2000, required=False, allow_blank=True)
        team_id = serializers.IntegerField(required=False, allow_null=True, min_value=1)
        default_visibility = serializers.ChoiceField(
            choices=AGENT_DEFAULT_VISIBILITIES, required=False,
            help_text="What its writes get when they name no visibility. Default: team when team_id is given, "
                      "else private.")

    @extend_schema(responses=AgentOutput(many=True))
    def get(self, request):
        """Pages the organisation's agents. Any member or agent key."""

        return paginate(self, selectors.agent_list(actor=request.actor), AgentOutput)

    @extend_schema(request=InputSerializer, responses={201: AgentOutput})
    def post(self, request):
        """Creates an agent, optionally in a team of the org (else a 400 on team_id). Org admins only; create
        a key for it next."""

        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        data = dict(s.validated_data)
        team = team_from_input(request.actor, data.pop("team_id", None))
        agent = services.agent_create(actor=request.actor, team=team, request_id=self.request_id(), **data)
        return Response(AgentOutput(agent).data, status=status.HTTP_201_CREATED)


class AgentDetailApi(Api):
    class InputSerializer(StrictSerializer):
        name = serializers.CharField(max_length=200, required=False)
        description = serializers.CharField(max_length=2000, required=False, allow_blank=True)
        team_id = serializers.IntegerField(required=False, allow_null=True, min_value=1)
        is_active = serializers.BooleanField(required=False)
        default_visibility = serializers.ChoiceField(choices=AGENT_DEFAULT_VISIBILITIES, required=False)

    @extend_schema(responses=AgentOutput)
    def get(self, request, agent_id: int):
        """One agent of the organisation."""

        return Response(AgentOutput(access.access_agent_by_id(request.actor, agent_id, for_write=False)).data)

    @extend_schema(request=InputSerializer, responses=AgentChangeOutput)
    def patch(self, request, agent_id: int):
        """Changes an agent's name, description, team, default_visibility or is_active. Org admins only.
        Taking an agent whose default is team out of its team makes the default private.

        is_active false revokes every live API key of the agent for good (keys_revoked counts them):
        setting is_active true again does not bring them back, the agent needs a new key (live_keys)."""

        agent = access.access_agent_by_id(request.actor, agent_id, for_write=True)
        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        data = dict(s.validated_data)
        if "team_id" in data:
            data["team"] = team_from_input(request.actor, data.pop("team_id"))
        live = _live_key_ids(agent)
        agent = services.agent_update(actor=request.actor, agent=agent, data=data, request_id=self.request_id())
        return Response(_changed_agent(agent, live))

    @extend_schema(responses={200: AgentChangeOutput}, description="Deactivates the agent: every live API key of "
                   "it is revoked for good (keys_revoked counts them; re-activating the agent with PATCH is_active "
                   "true does not bring them back, it needs a new key). The agent and its memory stay.")
    def delete(self, request, agent_id: int):
        agent = access.access_agent_by_id(request.actor, agent_id, for_write=True)
        live = _live_key_ids(agent)
        agent = services.agent_deactivate(actor=request.actor, agent=agent, request_id=self.request_id())
        return Response(_changed_agent(agent, live))


class KeyOutput(serializers.Serializer):
    id = serializers.IntegerField()
    agent_id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField()
    scopes = serializers.ListField(child=serializers.CharField())
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)


class KeyCreatedOutput(KeyOutput):
    key = serializers.CharField(help_text="The plain key. Shown once; store it now.")


class AgentKeyListCreateApi(Api):
    pagination_class = CursorPage

    class InputSerializer(StrictSerializer):
        name = serializers.CharField(max_length=200, required=False, allow_blank=True)
        scopes = serializers.ListField(
            child=serializers.ChoiceField(choices=Scope.choices), required=False, allow_empty=False, max_length=2
        )

    @extend_schema(responses=KeyOutput(many=True))
    def get(self, request, agent_id: int):
        """Pages the agent's API keys (prefixes only, never the keys). Org admins, or the agent itself with
        its own key."""

        agent = access.access_agent_by_id(request.actor, agent_id, for_write=False)
        if not (request.actor.is_org_admin or (request.actor.agent and request.actor.agent.id == agent.id)):
            access.require_org_admin(request.actor, action="manage API keys")
        return paginate(self, selectors.key_list(actor=request.actor, agent=agent), KeyOutput)

    @extend_schema(request=InputSerializer, responses={201: KeyCreatedOutput})
    def post(self, request, agent_id: int):
        """Creates an API key for the agent with the given scopes (read and write by default); the plain key
        is in the answer only. Org admins only."""

        agent = access.access_agent_by_id(request.actor, agent_id, for_write=True)
        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        key, plain = services.api_key_create(actor=request.actor, agent=agent, request_id=self.request_id(),
                                             **s.validated_data)
        data = dict(KeyOutput(key).data)
        data["key"] = plain
        return Response(data, status=status.HTTP_201_CREATED)


class KeyRevokeApi(Api):
    @extend_schema(request=None, responses=KeyOutput)
    def post(self, request, key_id: int):
        """Revokes the API key: it stops authenticating at once. Org admins only."""

        key = access.access_key_by_id(request.actor, key_id, for_write=True)
        key = services.api_key_revoke(actor=request.actor, key=key, request_id=self.request_id())
        return Response(KeyOutput(key).data)
