from django.urls import path

from . import apis

urlpatterns = [
    path("conflicts", apis.ConflictListApi.as_view(), name="conflict-list"),
    path("conflicts/<int:conflict_id>/resolve", apis.ConflictResolveApi.as_view(), name="conflict-resolve"),
    path("background/status", apis.BackgroundStatusApi.as_view(), name="background-status"),
]
