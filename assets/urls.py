from django.urls import path

from . import apis

urlpatterns = [
    path("assets", apis.AssetListCreateApi.as_view(), name="asset-list"),
    path("assets/<int:asset_id>", apis.AssetDetailApi.as_view(), name="asset-detail"),
    path("assets/<int:asset_id>/versions", apis.AssetVersionListApi.as_view(), name="asset-version-list"),
    path("assets/<int:asset_id>/versions/<int:version>", apis.AssetVersionDetailApi.as_view(),
         name="asset-version-detail"),
    path("assets/<int:asset_id>/transition", apis.AssetTransitionApi.as_view(), name="asset-transition"),
    path("assets/<int:asset_id>/promote", apis.AssetPromoteApi.as_view(), name="asset-promote"),
    path("grants", apis.GrantListCreateApi.as_view(), name="grant-list"),
    path("grants/<int:grant_id>", apis.GrantDetailApi.as_view(), name="grant-detail"),
    path("agents/<int:agent_id>/bindings", apis.AgentBindingListApi.as_view(), name="agent-binding-list"),
    path("agents/<int:agent_id>/bindings/<int:binding_id>", apis.AgentBindingDetailApi.as_view(),
         name="agent-binding-detail"),
    path("audit", apis.AuditListApi.as_view(), name="audit-list"),
    path("memories/nodes/<int:node_id>/governance", apis.NodeGovernanceApi.as_view(), name="node-governance"),
    path("context", apis.ContextApi.as_view(), name="context"),
    path("export", apis.ExportApi.as_view(), name="memory-export"),
    path("import", apis.ImportApi.as_view(), name="memory-import"),
]
