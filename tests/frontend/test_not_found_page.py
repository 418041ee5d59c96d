"""A console 404 is the console's styled page with a way back (the dashboard, or signing in), still
status 404; a 404 under /api/ stays the API's JSON error shape. And the favicon exists."""

from __future__ import annotations

import pytest

from assets import services as asset_services
from teams.auth import actor_for_user

pytestmark = pytest.mark.django_db


def _styled_404(response) -> str:
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assert 'id="not-found"' in html and "frontend/console.css" in html and 'name="viewport"' in html
    assert "frontend/favicon.svg" in html
    return html


@pytest.mark.parametrize("path", ["/console/memories/999999999/", "/console/memories/999999999/graph/",
                                  "/console/agents/999999999/", "/no-such-page/"])
def test_a_signed_in_user_gets_the_styled_page_with_the_dashboard_link(world, login, path):
    html = _styled_404(login(world["a"].member).get(path))
    assert 'href="/console/"' in html and "Back to the dashboard" in html
    assert 'href="/login/"' not in html


def test_another_orgs_asset_is_the_styled_404(world, login):
    b = world["b"]
    asset = asset_services.asset_create(actor=actor_for_user(b.owner, b.org), kind="wiki", title="Beta runbook",
                                        visibility="org", body="beta only")
    assert login(b.member).get(f"/console/assets/{asset.id}/").status_code == 200
    html = _styled_404(login(world["a"].owner).get(f"/console/assets/{asset.id}/"))
    assert "Beta runbook" not in html and 'href="/console/"' in html


def test_an_anonymous_visitor_gets_a_sign_in_link(login):
    html = _styled_404(login(None).get("/no-such-page/"))
    assert 'href="/login/"' in html and "Back to the dashboard" not in html


def test_api_404s_stay_json(world, client_for):
    no_endpoint = client_for(world["a"].key).get("/api/v1/no-such-endpoint")
    assert no_endpoint.status_code == 404 and no_endpoint["Content-Type"] == "application/json"
    assert no_endpoint.json()["error"]["code"] == "no_endpoint"
    no_object = client_for(world["a"].key).get("/api/v1/memories/nodes/999999999")
    assert no_object.status_code == 404 and no_object["Content-Type"] == "application/json"
    body = no_object.json()
    assert body["error"]["code"] == "not_found" and set(body["error"]) == {"code", "message", "fields"}
    assert b"not-found" not in no_object.content
    anonymous = client_for(None).get("/api/v1/no-such-endpoint")
    assert anonymous.status_code == 404 and anonymous.json()["error"]["code"] == "no_endpoint"


def test_the_favicon_is_served_and_linked(world, login):
    c = login(world["a"].owner)
    icon = c.get("/static/frontend/favicon.svg")
    assert icon.status_code == 200 and b"<svg" in b"".join(icon.streaming_content)
    redirect = c.get("/favicon.ico")
    assert redirect.status_code == 302 and redirect["Location"] == "/static/frontend/favicon.svg"
    for path in ("/console/", "/login/"):
        page = login(None if path == "/login/" else world["a"].owner).get(path)
        assert page.status_code == 200 and 'rel="icon" href="/static/frontend/favicon.svg"' in page.content.decode()
