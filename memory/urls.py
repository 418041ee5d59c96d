from django.urls import path

from . import apis

urlpatterns = [
    path("memories/weave", apis.WeaveApi.as_view(), name="memory-weave"),
    path("memories/weave-session", apis.WeaveSessionApi.as_view(), name="memory-weave-session"),
    path("memories/bulk", apis.BulkIngestApi.as_view(), name="memory-bulk"),
    path("memories/bulk/<int:batch_id>", apis.IngestBatchDetailApi.as_view(), name="memory-bulk-detail"),
    path("memories/resonate", apis.ResonateApi.as_view(), name="memory-resonate"),
    path("memories/nodes", apis.NodeListApi.as_view(), name="memory-node-list"),
    path("memories/nodes/<int:node_id>", apis.NodeDetailApi.as_view(), name="memory-node-detail"),
]
