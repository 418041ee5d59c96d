"""The console at a phone's width (390 px), in headless Debian chromium against a real uvicorn (the
fixtures of test_e2e.py): no page is wider than the viewport (long unbroken memory text and asset
titles included), the header's links and "Sign out" are on screen inside the dark header, and the
memory drawer opens fully on screen. Screenshots go to a temporary directory, not docs/."""

from __future__ import annotations

import pytest

# The live server and the ORM-on-a-thread helper of the console's end-to-end test.
from .test_e2e import CHROMIUM, CHROMIUM_ARGS, console_login, live_server_url  # noqa: F401

pytestmark = [pytest.mark.slow]

WIDTH = 390
DESKTOP = 1360
LONG_TEXT = "A" * 3000
LONG_TITLE = "T" * 200
# The innermost elements sticking out on the right, for the failure message.
OFFENDERS = f"""[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > {WIDTH + 0.5}
  && ![...e.children].some(c => c.getBoundingClientRect().right > {WIDTH + 0.5}))
  .slice(0, 5).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className && e.className.baseVal === undefined
  ? '.' + e.className : '') + ' ' + Math.round(e.getBoundingClientRect().right))"""


@pytest.fixture
def seeded(world):
    """Data first: once Playwright runs, its event loop makes the ORM refuse this thread."""
    from assets import services as asset_services
    from memory import services
    from memory.models import Visibility
    from reflection.models import Conflict
    from teams.auth import actor_for_user

    a = world["a"]
    owner = actor_for_user(a.owner, a.org)

    def weave(text, key=""):
        return services.weave_session(actor=owner, session_key=key, visibility=Visibility.ORG,
                                      turns=[services.TurnIn(text=text, speaker="Ana")]).node_ids[0]

    weave("We booked the Lisbon offsite for March 14.", "offsite")
    moved = weave("We moved the Lisbon offsite to March 21.", "offsite-2")
    first = weave("We booked the Lisbon offsite for March 14 (again).", "offsite")
    Conflict.objects.create(org=a.org, node_a_id=min(first, moved), node_b_id=max(first, moved),
                            reason="different date for the offsite", detector="rule")
    world["long_node"] = weave(LONG_TEXT)
    long_asset = asset_services.asset_create(actor=owner, kind="wiki", title=LONG_TITLE, visibility="org",
                                             summary="S" * 150, body="B" * 2000)
    asset_services.asset_update(actor=owner, asset=long_asset, expected_version=1, data={"body": "C" * 2000})
    world["long_asset"] = long_asset.id
    return world


@pytest.fixture
def phone(tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={"width": WIDTH, "height": 844}, is_mobile=True, has_touch=True,
                                      device_scale_factor=1)
        context.set_default_timeout(20_000)
        page = context.new_page()
        page.shots = tmp_path
        yield page
        context.close()
        browser.close()


def _inside(box, outer=None) -> bool:
    left, right = (0, WIDTH) if outer is None else (outer["x"], outer["x"] + outer["width"])
    return box is not None and box["x"] >= left - 0.5 and box["x"] + box["width"] <= right + 0.5


def _fits(page, name: str, width: int = WIDTH) -> None:
    page.screenshot(path=page.shots / f"{name}.png", full_page=True)
    wide = page.evaluate("document.documentElement.scrollWidth")
    assert wide <= width, f"{name}: the page is {wide}px wide at a {width}px viewport: {page.evaluate(OFFENDERS)}"


@pytest.mark.django_db(transaction=True)
def test_console_fits_a_phone(seeded, live_server_url, phone):  # noqa: F811
    a, base, page = seeded["a"], live_server_url, phone

    page.goto(f"{base}/login/")
    _fits(page, "login")
    page.fill("input[name=username]", a.owner.username)
    page.fill("input[name=password]", "pw-owner-123")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/console/")
    page.wait_for_selector("#health table.health")
    _fits(page, "dashboard")
    # The health rows hold what the services report (worker host names, error details): however
    # long, they scroll inside the card rather than widen the page (a long worker name once did).
    page.evaluate("""document.querySelector('#health table.health td.muted').textContent =
                     'nylon-worker-with-a-rather-long-host-name@' + 'x'.repeat(60) + ', ' + 'y'.repeat(40)""")
    _fits(page, "dashboard-long-health")

    # the header: every link and "Sign out" on screen, inside the dark bar
    header = page.locator("header.top").bounding_box()
    assert _inside(header)
    for link in page.locator("header.top nav a").all():
        box = link.bounding_box()
        assert _inside(box) and _inside(box, header), (link.inner_text(), box, header)
        assert header["y"] <= box["y"] and box["y"] + box["height"] <= header["y"] + header["height"]
    sign_out = page.locator("header.top >> text=Sign out").bounding_box()
    assert _inside(sign_out) and _inside(sign_out, header), sign_out
    assert sign_out["y"] + sign_out["height"] <= header["y"] + header["height"]

    pages = {
        "memories": "/console/memories/",
        "memory-long": f"/console/memories/{seeded['long_node']}/",
        "resonate": "/console/resonate/",
        "assets": "/console/assets/",
        "asset-long": f"/console/assets/{seeded['long_asset']}/",
        "asset-acl": f"/console/assets/{seeded['long_asset']}/acl/",
        "teams": "/console/teams/",
        "team": f"/console/teams/{a.team.id}/",
        "members": "/console/members/",
        "agents": "/console/agents/",
        "agent": f"/console/agents/{a.agent.id}/",
        "audit": "/console/audit/",
        "conflicts": "/console/conflicts/",
        "not-found": "/console/memories/999999999/",
    }
    for name, path in pages.items():
        page.goto(f"{base}{path}")
        _fits(page, name)

    # the memory browser's drawer: a click on a row opens it fully on screen
    page.goto(f"{base}/console/memories/")
    page.locator(f"tr.node-row[data-node-id='{seeded['long_node']}'] td:nth-child(3)").click()
    page.wait_for_selector("#drawer:not([hidden]) #node-drawer")
    page.wait_for_timeout(300)
    drawer = page.locator("#drawer").bounding_box()
    assert _inside(drawer), drawer
    assert drawer["y"] >= 0 and drawer["y"] + drawer["height"] <= 844 + 0.5
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    close = page.locator("#drawer .close").bounding_box()
    assert close is not None and _inside(close), close
    page.screenshot(path=page.shots / "drawer.png")
    page.click("#drawer .close")
    page.wait_for_selector("#drawer", state="hidden")

    page.click("header.top >> text=Sign out")
    page.wait_for_url(f"{base}/login/")

    # on a desktop the long texts wrap too: no page wider than the window
    desk_ctx = page.context.browser.new_context(viewport={"width": DESKTOP, "height": 900})
    desk = desk_ctx.new_page()
    desk.shots = page.shots
    console_login(desk, base, a.owner.username, "pw-owner-123")
    for name in ("memories", "memory-long", "assets", "asset-long", "conflicts", "not-found"):
        desk.goto(f"{base}{pages[name]}")
        _fits(desk, f"desktop-{name}", DESKTOP)
    desk.goto(f"{base}/console/memories/")
    desk.locator(f"tr.node-row[data-node-id='{seeded['long_node']}'] td:nth-child(3)").click()
    desk.wait_for_selector("#drawer:not([hidden]) #node-drawer")
    assert _inside(desk.locator("#drawer").bounding_box(), {"x": 0, "width": DESKTOP})
    _fits(desk, "desktop-drawer", DESKTOP)
    desk_ctx.close()
