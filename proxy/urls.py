from django.urls import path

from . import apis, views

urlpatterns = [
    path("proxy/openai/v1/chat/completions", views.openai_chat_completions, name="proxy-openai-chat"),
    path("proxy/anthropic/v1/messages", views.anthropic_messages, name="proxy-anthropic-messages"),
    path("api/v1/proxy/stats", apis.ProxyStatsApi.as_view(), name="proxy-stats"),
]
