"""ASGI entry: HTTP through Django, websockets through Channels (live console events)."""

from __future__ import annotations

import os
import threading

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "nylon_project.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs the app registry ready)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from assets.context import warm_up_thread  # noqa: E402
from assets.mcp import http_app as mcp_http_app  # noqa: E402
from frontend.routing import websocket_urlpatterns  # noqa: E402
from nylon_project.shedding import LoadShedder  # noqa: E402

# MCP over streamable HTTP at /mcp (agent key in the Authorization header); its lifespan runs the
# MCP session manager. Everything else over HTTP is Django.
mcp_app = mcp_http_app()


async def http_router(scope, receive, send):
    path = scope.get("path", "")
    if path == "/mcp" or path.startswith("/mcp/"):
        return await mcp_app(scope, receive, send)
    return await django_asgi_app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": LoadShedder(http_router, settings.NYLON_WEB_MAX_INFLIGHT),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
        "lifespan": mcp_app,
    }
)

# The model (and the recently written orgs' caches) load in the background while the server starts
# accepting requests, not in the first one.
threading.Thread(target=warm_up_thread, name="nylon-warm-up", daemon=True).start()
