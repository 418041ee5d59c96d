from django.urls import path

from . import apis, views

urlpatterns = [
    path("proxy/openai/v1/chat/completions", views.openai_chat_completions, name="proxy-openai-chat"),
    path("proxy/anthropic/v1/messages", views.anthropic_messages, name="proxy-anthropic-messages"),
    path("proxy/openai/v1/models", views.openai_models, name="proxy-openai-models"),
    path("proxy/openai/v1/models/<path:model>", views.openai_models),
    path("proxy/anthropic/v1/models", views.anthropic_models, name="proxy-anthropic-models"),
    path("proxy/anthropic/v1/models/<path:model>", views.anthropic_models),
    path("proxy/<path:rest>", views.unknown),
    path("proxy/", views.unknown),
    path("proxy", views.unknown),
    path("api/v1/proxy/stats", apis.ProxyStatsApi.as_view(), name="proxy-stats"),
]
