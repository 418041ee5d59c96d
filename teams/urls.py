from django.urls import path

from . import apis

urlpatterns = [
    path("ping", apis.PingApi.as_view(), name="ping"),
    path("org", apis.OrgCurrentApi.as_view(), name="org-current"),
    path("teams", apis.TeamListCreateApi.as_view(), name="team-list"),
    path("teams/<int:team_id>", apis.TeamDetailApi.as_view(), name="team-detail"),
    path("teams/<int:team_id>/members", apis.TeamMemberListApi.as_view(), name="team-member-list"),
    path("teams/<int:team_id>/members/<int:user_id>", apis.TeamMemberDetailApi.as_view(),
         name="team-member-detail"),
    path("members", apis.MemberListApi.as_view(), name="member-list"),
    path("members/<int:user_id>", apis.MemberDetailApi.as_view(), name="member-detail"),
    path("invitations", apis.InvitationListApi.as_view(), name="invitation-list"),
    path("invitations/<int:invitation_id>", apis.InvitationDetailApi.as_view(), name="invitation-detail"),
    path("agents", apis.AgentListCreateApi.as_view(), name="agent-list"),
    path("agents/<int:agent_id>", apis.AgentDetailApi.as_view(), name="agent-detail"),
    path("agents/<int:agent_id>/keys", apis.AgentKeyListCreateApi.as_view(), name="agent-key-list"),
    path("keys/<int:key_id>/revoke", apis.KeyRevokeApi.as_view(), name="key-revoke"),
]
