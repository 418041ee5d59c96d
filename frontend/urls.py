from django.contrib.staticfiles.views import serve
from django.urls import path, re_path

from .views import account, admin, assets, base, governance, invitations, memory

app_name = "frontend"

urlpatterns = [
    path("", base.home, name="home"),
    path("login/", account.limit_failed_logins(account.LoginView.as_view()), name="login"),
    path("password-reset/", account.PasswordResetView.as_view(), name="password-reset"),
    path("password-reset/sent/", account.PasswordResetDoneView.as_view(), name="password-reset-done"),
    path("reset/<uidb64>/<token>/", account.PasswordResetConfirmView.as_view(), name="password-reset-confirm"),
    path("reset/done/", account.PasswordResetCompleteView.as_view(), name="password-reset-complete"),
    path("logout/", base.LogoutView.as_view(), name="logout"),
    path("invite/<str:token>", invitations.invite, name="invite"),
    path("console/", base.dashboard, name="dashboard"),
    path("console/org", base.org_switch, name="org-switch"),
    path("console/health", base.health_panel, name="health"),
    path("console/feed/nodes", base.feed_nodes, name="feed-nodes"),
    path("console/memories/", memory.memory_browser, name="memories"),
    path("console/memories/<int:node_id>/", memory.node_drawer, name="node"),
    path("console/memories/<int:node_id>/delete", memory.node_delete, name="node-delete"),
    path("console/memories/<int:node_id>/graph/", memory.node_graph, name="node-graph"),
    path("console/memories/<int:node_id>/graph.json", memory.node_graph_json, name="node-graph-json"),
    path("console/resonate/", memory.resonate, name="resonate"),
    path("console/assets/", assets.assets, name="assets"),
    path("console/assets/<int:asset_id>/", assets.asset_detail, name="asset"),
    path("console/assets/<int:asset_id>/acl/", assets.asset_acl, name="asset-acl"),
    path("console/teams/", admin.teams, name="teams"),
    path("console/teams/<int:team_id>/", admin.team_detail, name="team"),
    path("console/members/", admin.members, name="members"),
    path("console/members/<int:user_id>", admin.member_update, name="member-update"),
    path("console/invitations/<int:invitation_id>/revoke", admin.invitation_revoke, name="invitation-revoke"),
    path("console/agents/", admin.agents, name="agents"),
    path("console/agents/<int:agent_id>/", admin.agent_detail, name="agent"),
    path("console/keys/<int:key_id>/revoke", admin.key_revoke, name="key-revoke"),
    path("console/audit/", admin.audit, name="audit"),
    path("console/conflicts/", governance.conflicts, name="conflicts"),
    path("console/conflicts/<int:conflict_id>/resolve", governance.conflict_resolve, name="conflict-resolve"),
    # Static files (the console's CSS/JS, vendored htmx and vis-network, the API docs' assets) are
    # served by the app itself so a plain uvicorn needs nothing in front; a proxy may take over.
    re_path(r"^static/(?P<path>.*)$", serve, {"insecure": True}),
]
