"""End to end: a real uvicorn process on a loopback port against the test database, driven by
headless Debian chromium through Playwright (no browser is downloaded). Saves a screenshot of each
main page under docs/screenshots/."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "docs" / "screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def console_login(page, base: str, username: str, password: str) -> None:
    """Signs in through the login form and waits for the dashboard."""
    page.goto(f"{base}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/console/")


# No skip when chromium is missing: `make test` installs it, and a silently skipped browser suite
# would hide a broken console. A missing browser fails here, loudly.
pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def live_server_url(django_db_setup, django_db_blocker):
    """uvicorn serving nylon_project.asgi on the test database, with its own Redis prefixes."""
    from django.db import connection

    from nylon_project import embedded
    from nylon_project.live import free_port, live_env

    # Not start_live_server: the live feed needs uvicorn's websockets and the lifespan left on.
    port = free_port()
    tag = uuid.uuid4().hex[:8]
    env = live_env()
    env.update({"NYLON_ENQUEUE_TASKS": "0", "NYLON_CHANNEL_PREFIX": f"e2e-{tag}", "NYLON_CACHE_PREFIX": f"e2e-{tag}",
                "NYLON_DB_CONN_MAX_AGE": "0"})
    log = open(embedded.nylon_home() / f"e2e-uvicorn-{tag}.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "nylon_project.asgi:application", "--host", "127.0.0.1",
         "--port", str(port), "--ws", "websockets", "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"uvicorn exited: see {log.name}")
        try:
            if httpx.get(f"{url}/login/", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    else:
        proc.kill()
        raise RuntimeError(f"uvicorn did not start: see {log.name}")
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()
    # Let Postgres reap the server's sessions so the test database can be dropped at the end.
    with django_db_blocker.unblock(), connection.cursor() as cur:
        for _ in range(50):
            cur.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                        "AND pid <> pg_backend_pid()")
            if cur.fetchone()[0] == 0:
                break

            time.sleep(0.1)


@pytest.fixture
def browser_page():
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1360, "height": 900})
        context.set_default_timeout(20_000)
        page = context.new_page()
        yield page
        context.close()
        browser.close()


@pytest.fixture
def seeded(world):
    """Data first: once Playwright runs, its event loop makes the ORM refuse this thread."""
    from memory import services
    from memory.models import Visibility
    from teams.auth import actor_for_user

    a = world["a"]
    owner = actor_for_user(a.owner, a.org)
    turns = [
        ("Ana", "We booked the Lisbon offsite for March 14."),
        ("Ben", "Great! I will reserve the Alfama venue tomorrow."),
        ("Ana", "Ben prefers window seats on the flight to Lisbon."),
        ("Ben", "The budget for the offsite is 12,000 euros."),
    ]
    services.weave_session(actor=owner, session_key="offsite",
                           turns=[services.TurnIn(text=t, speaker=s) for s, t in turns], visibility=Visibility.ORG)
    services.weave_session(actor=owner, turns=[services.TurnIn(text="Owner-only: review Ben's contract.")],
                           visibility=Visibility.PRIVATE)
    from reflection.models import Conflict

    moved = services.weave_session(actor=owner, session_key="offsite-2", visibility=Visibility.ORG, turns=[
        services.TurnIn(text="We moved the Lisbon offsite to March 21.", speaker="Ana")]).node_ids[0]
    first = services.weave_session(actor=owner, session_key="offsite", visibility=Visibility.ORG, turns=[
        services.TurnIn(text="We booked the Lisbon offsite for March 14.", speaker="Ana")]).node_ids[0]
    Conflict.objects.create(org=a.org, node_a_id=min(first, moved), node_b_id=max(first, moved),
                            reason="different date for the offsite", detector="rule")

    # Assets: the owner's private runbook in two versions (the diff), and two org-wide ones.
    from assets import services as asset_services

    runbook = asset_services.asset_create(
        actor=owner, kind="wiki", title="Offsite runbook", summary="Who books what for Lisbon",
        body="1. Book the venue.\n2. Book the flights.\n3. Share the budget (12,000 euros).")
    asset_services.asset_update(actor=owner, asset=runbook, expected_version=1, data={
        "body": "1. Book the Alfama venue.\n2. Book the flights (Ben: window seat).\n3. Share the budget (12,000 euros)."})
    skill = asset_services.asset_create(actor=owner, kind="skill", title="Escalation skill", visibility="org",
                                        summary="Page the on-call engineer", body="Page the on-call engineer.")
    for to in ("candidate", "approved"):
        asset_services.asset_transition(actor=owner, asset=skill, to=to, expected_version=skill.version)
    asset_services.asset_create(actor=owner, kind="persona", title="Team persona", visibility="org",
                                body="You are the offsite planning assistant.")
    world["asset_id"] = runbook.id
    return world


def _in_thread(fn):
    """Runs ORM code on a thread of its own: Playwright's event loop makes the ORM refuse this one."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connections

    def run():
        try:
            return fn()
        finally:
            connections.close_all()  # the test database is dropped at the end: leave no session

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result()


@pytest.mark.django_db(transaction=True)
def test_console_end_to_end(seeded, live_server_url, browser_page):
    a = seeded["a"]
    page = browser_page
    base = live_server_url

    # sign in
    page.goto(f"{base}/console/")
    assert "/login/" in page.url
    page.screenshot(path=SHOTS / "login.png")
    page.fill("input[name=username]", a.owner.username)
    page.fill("input[name=password]", "pw-owner-123")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/console/")

    # dashboard: counts, chart, the lazily loaded health panel and a live websocket
    page.wait_for_selector("#health table.health")
    assert page.inner_text("#node-total") == "7"  # 4 offsite turns, 1 private, 2 for the conflict
    page.wait_for_selector("body[data-feed=live]")
    page.screenshot(path=SHOTS / "dashboard.png", full_page=True)

    # memory browser → drawer
    page.click("nav >> text=Memories")
    page.wait_for_selector("tr.node-row")
    assert page.locator("tr.node-row").count() == 7
    page.fill("input[name=q]", "Alfama")
    page.click("#node-filters button[type=submit]")
    page.wait_for_function("document.querySelectorAll('tr.node-row').length === 1")
    page.screenshot(path=SHOTS / "memories.png", full_page=True)
    page.click("tr.node-row td:nth-child(3)")
    page.wait_for_selector("#drawer:not([hidden]) #node-drawer")
    drawer = page.inner_text("#drawer")
    assert "Alfama" in drawer and "Six silks" in drawer and "Tension" in drawer
    page.screenshot(path=SHOTS / "node.png")
    node_id = page.get_attribute("#node-drawer", "data-node-id")

    # neighbourhood graph (vis-network)
    page.goto(f"{base}/console/memories/{node_id}/graph/")
    page.wait_for_selector("#graph[data-ready='1'] canvas")
    assert int(page.get_attribute("#graph", "data-nodes")) >= 2
    page.screenshot(path=SHOTS / "graph.png")

    # resonate playground
    page.click("nav >> text=Resonate")
    page.fill("textarea[name=query]", "When is the Lisbon offsite?")
    page.click("#resonate-form button[type=submit]")
    page.wait_for_selector("#hits li.hit")
    assert "March 14" in page.inner_text("#hits")
    page.locator("#hits details").first.click()
    page.screenshot(path=SHOTS / "resonate.png", full_page=True)

    # teams and members
    page.click("nav >> text=Teams")
    page.wait_for_selector("#team-table")
    page.screenshot(path=SHOTS / "teams.png")
    page.click("nav >> text=Members")
    page.wait_for_selector("#member-table")
    page.screenshot(path=SHOTS / "members.png")

    # agents: create a key (shown once)
    page.click("nav >> text=Agents")
    page.click(f"#agent-table >> text={a.agent.name}")
    page.fill("#key-create input[name=name]", "e2e")
    page.click("#key-create-button")
    page.wait_for_selector("#plain-key-value")
    plain = page.inner_text("#plain-key-value").strip()
    assert plain.startswith("nyl_")
    # (no ORM while the browser runs: its event loop would give the ORM a connection of its own)
    me = httpx.get(f"{base}/api/v1/org", headers={"Authorization": f"Bearer {plain}"}, timeout=10)
    assert me.status_code == 200 and me.json()["slug"] == "alpha"
    page.screenshot(path=SHOTS / "agent-key.png", full_page=True)

    # audit log
    page.click("nav >> text=Audit")
    page.wait_for_selector("#audit-table")
    assert "key.create" in page.inner_text("#audit-table")
    page.screenshot(path=SHOTS / "audit.png")

    # conflicts queue: side by side, resolved in the browser, the resolution audited
    page.click("nav >> text=Conflicts")
    page.wait_for_selector("section.conflict")
    assert "March 21" in page.inner_text("section.conflict")
    page.screenshot(path=SHOTS / "conflicts.png", full_page=True)
    page.click("section.conflict >> text=Keep both")
    page.wait_for_selector("#no-conflicts")
    page.click("nav >> text=Audit")
    page.wait_for_selector("#audit-table")
    assert "conflict.resolve" in page.inner_text("#audit-table")

    # assets: list → one asset (versions, diff) → restricted → a member granted in the ACL editor
    asset_id = seeded["asset_id"]
    member_ctx = page.context.browser.new_context(viewport={"width": 1360, "height": 900})
    member_page = member_ctx.new_page()
    console_login(member_page, base, a.member.username, "pw-member-123")
    assert member_page.goto(f"{base}/console/assets/{asset_id}/").status == 404  # the owner's private asset
    page.click("nav >> text=Assets")
    page.wait_for_selector("#asset-table")
    assert page.locator("tr.asset-row").count() == 3
    page.screenshot(path=SHOTS / "assets.png", full_page=True)
    page.click("#asset-table >> text=Offsite runbook")
    page.wait_for_selector("#diff-split")
    assert "Alfama" in page.inner_text("#diff-split tr.d-replace")
    assert page.locator("#version-table tr[data-version]").count() == 2
    page.screenshot(path=SHOTS / "asset.png", full_page=True)
    page.select_option("#visibility-form select[name=visibility]", "restricted")
    page.click("#visibility-save")
    page.wait_for_selector("#acl-link")
    assert page.inner_text("#asset-visibility") == "restricted"
    page.click("#acl-link")
    page.wait_for_selector("#no-grants")
    page.select_option("#grant-add select[name=grantee]", label=f"user:{a.member.username}")
    page.click("#grant-save")
    page.wait_for_selector(f"#grant-table tr[data-grant-id] >> text=user:{a.member.username}")
    page.screenshot(path=SHOTS / "asset-acl.png", full_page=True)

    def acl_in_db():
        from assets.models import AccessGrant, Asset, AuditEvent

        grants = list(AccessGrant.objects.filter(object_type="asset", object_id=asset_id)
                      .values_list("grantee_kind", "grantee_user_id", "permission"))
        audited = set(AuditEvent.objects.filter(object_id=str(asset_id)).values_list("action", flat=True))
        return Asset.objects.get(id=asset_id).visibility, grants, audited

    visibility, grants, audited = _in_thread(acl_in_db)
    assert visibility == "restricted" and grants == [("user", a.member.id, "read")]
    assert {"asset.update", "acl.grant"} <= audited
    # the grantee now reads it
    assert member_page.goto(f"{base}/console/assets/{asset_id}/").status == 200
    assert "Offsite runbook" in member_page.inner_text("h1")
    member_ctx.close()

    # live feed: weave through the API with the new key while the page is open
    page.click("nav >> text=Memories")
    page.wait_for_selector("body[data-feed=live]")
    r = httpx.post(f"{base}/api/v1/memories/weave", headers={"Authorization": f"Bearer {plain}"},
                   json={"text": "Live: the Lisbon venue confirmed our booking.", "visibility": "org"}, timeout=30)
    assert r.status_code == 201, r.text
    new_id = r.json()["node_ids"][0]
    page.wait_for_selector(f"#feed-list li[data-node-id='{new_id}']")
    page.wait_for_selector(f"#node-rows tr.node-row[data-node-id='{new_id}']")  # the table too
    assert "venue confirmed" in page.inner_text("#feed-list")
    # a private write of someone else never shows up in this feed
    r = httpx.post(f"{base}/api/v1/memories/weave", headers={"Authorization": f"Bearer {a.key}"},
                   json={"text": "Bot private scratchpad.", "visibility": "private"}, timeout=30)
    hidden_id = r.json()["node_ids"][0]
    page.wait_for_timeout(1500)
    assert page.locator(f"[data-node-id='{hidden_id}']").count() == 0
    page.screenshot(path=SHOTS / "live-feed.png")

    # sign out
    page.click("header.top >> text=Sign out")
    page.wait_for_url(f"{base}/login/")
