from __future__ import annotations

from django.http import HttpResponse


def home(request):
    # The admin console grows here (issue: admin web console); until then point at the API.
    return HttpResponse(
        "<!doctype html><title>Nylon</title><h1>Nylon</h1>"
        "<p>Team memory for AI agents. API docs: <a href='/api/docs/'>/api/docs/</a>, "
        "health: <a href='/healthz'>/healthz</a>.</p>"
    )
