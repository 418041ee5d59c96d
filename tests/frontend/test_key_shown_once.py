"""A new API key's secret is shown once, and reloading the page never creates another key. Before:
the create POST rendered the secret in its own response (never redirected, so the secret would not
be stored), and the browser's reload re-sent that POST: a second live key with the same name, the
first still active. Now the POST creates the key and answers 303 to the agent's page with a one-time
token; the GET shows the secret once (no-store) and a reload repeats only that GET. In between, the
database-backed session holds the secret only XORed with a pad that travels in the URL."""

from __future__ import annotations

import re

import pytest
from django.contrib.sessions.models import Session

from teams.models import Agent, ApiKey

from .test_e2e import CHROMIUM, CHROMIUM_ARGS, console_login, live_server_url  # noqa: F401

PLAIN = re.compile(r'id="plain-key-value">(nyl_[^<]+)<')


def _create(client, agent_id, name="ci-key"):
    return client.post(f"/console/agents/{agent_id}/", {"op": "key", "name": name, "scopes": ["read", "write"]})


@pytest.mark.django_db
def test_post_redirects_and_the_get_shows_the_secret_once(world, login):
    a = world["a"]
    admin = login(a.admin)
    r = _create(admin, a.agent.id)
    assert r.status_code == 303 and r["Location"].startswith(f"/console/agents/{a.agent.id}/?new_key=")
    assert "nyl_" not in r.content.decode()
    key = ApiKey.objects.get(agent=a.agent, name="ci-key")
    shown = admin.get(r["Location"])
    assert shown.status_code == 200 and "no-store" in shown["Cache-Control"]
    plain = PLAIN.search(shown.content.decode()).group(1)
    assert plain.startswith(f"nyl_{key.prefix}_")
    assert login(None).get("/api/v1/org", HTTP_AUTHORIZATION=f"Bearer {plain}").status_code == 200
    # the reload: the same GET, no secret, a note instead, and still one key
    again = admin.get(r["Location"]).content.decode()
    assert plain not in again and 'id="plain-key-value"' not in again and 'id="plain-key-gone"' in again
    assert key.prefix in again
    assert ApiKey.objects.filter(agent=a.agent, name="ci-key").count() == 1


@pytest.mark.django_db
def test_the_secret_is_not_in_the_session_rows_and_the_token_is_bound(world, login):
    a = world["a"]
    admin, owner = login(a.admin), login(a.owner)
    r = _create(admin, a.agent.id)
    token = r["Location"].split("new_key=", 1)[1]
    # what the database holds between the POST and the GET: the sessions, raw and decoded
    rows = [f"{s.session_data} {s.get_decoded()}" for s in Session.objects.all()]
    # another agent's page, another user's session or a mangled pad show nothing, and only the
    # mangled pad (right entry, wrong pad) spends the entry
    other = Agent.objects.create(org=a.org, name="other")
    entry_id = token.split(".", 1)[0]
    for client, url in ((admin, f"/console/agents/{other.id}/?new_key={token}"), (owner, r["Location"])):
        assert 'id="plain-key-value"' not in client.get(url).content.decode()
    plain = PLAIN.search(admin.get(r["Location"]).content.decode()).group(1)
    secret = plain.split("_", 2)[2]
    assert rows and not any(secret in row or plain in row for row in rows)
    assert not any(secret in f"{s.session_data} {s.get_decoded()}" for s in Session.objects.all())
    r = _create(admin, a.agent.id, name="second")
    entry_id = r["Location"].split("new_key=", 1)[1].split(".", 1)[0]
    bad = admin.get(f"/console/agents/{a.agent.id}/?new_key={entry_id}.AAAA").content.decode()
    assert 'id="plain-key-value"' not in bad and 'id="plain-key-gone"' in bad
    assert 'id="plain-key-value"' not in admin.get(r["Location"]).content.decode()


@pytest.mark.django_db
def test_invalid_key_form_still_renders_its_errors(world, login):
    a = world["a"]
    r = login(a.admin).post(f"/console/agents/{a.agent.id}/", {"op": "key", "name": "x", "scopes": []})
    assert r.status_code == 400 and 'id="plain-key-value"' not in r.content.decode()
    assert not ApiKey.objects.filter(agent=a.agent, name="x").exists()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_reloading_the_new_key_page_creates_no_second_key(world, live_server_url):  # noqa: F811
    from playwright.sync_api import sync_playwright

    a, base = world["a"], live_server_url
    agent_id = a.agent.id
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            context.set_default_timeout(20_000)
            page = context.new_page()
            console_login(page, base, a.owner.username, "pw-owner-123")
            page.goto(f"{base}/console/agents/{agent_id}/")
            page.fill("#key-create input[name=name]", "ci-key")
            page.check("#key-create input[name=scopes][value=read]")
            page.check("#key-create input[name=scopes][value=write]")
            page.click("#key-create-button")
            page.wait_for_selector("#plain-key-value")
            plain = page.inner_text("#plain-key-value").strip()
            assert plain.startswith("nyl_")
            page.reload()
            page.wait_for_selector("#key-table")
            assert page.locator("#plain-key-value").count() == 0 and plain not in page.content()
            assert page.locator("#plain-key-gone").count() == 1
            assert page.locator("#key-table tr", has_text="ci-key").count() == 1
            context.close()
        finally:
            browser.close()
    # (the ORM again only once the browser's event loop is gone)
    assert ApiKey.objects.filter(agent_id=agent_id, name="ci-key").count() == 1
    assert ApiKey.objects.filter(agent_id=agent_id, name="ci-key", revoked_at__isnull=True).count() == 1
