"""A long name without spaces does not widen the console's pages, in headless Debian chromium against
a real uvicorn (the fixtures of test_e2e.py) at a desktop's 1280x800. Before: a team named with 200
letters and no space made the Teams table 2775 px wide (its name and slug cells kept the word whole),
and every team <select> (the Memories and Assets "Team" filters, the new-agent and new-asset forms,
the ACL grantee list) took the option's width, so those pages scrolled sideways to 1808 px."""

from __future__ import annotations

import pytest

from .test_e2e import CHROMIUM, CHROMIUM_ARGS, console_login, live_server_url  # noqa: F401

pytestmark = [pytest.mark.slow]

LONG = "Platformengineeringandreliability" * 6 + "Nylonteam"  # 207 letters, no space: cut to 200 below


@pytest.fixture
def seeded(world):
    """Data first: once Playwright runs, its event loop makes the ORM refuse this thread."""
    from assets import services as asset_services
    from memory.models import Visibility
    from teams import services as team_services
    from teams.auth import actor_for_user

    a = world["a"]
    owner = actor_for_user(a.owner, a.org)
    team = team_services.team_create(actor=owner, name=LONG[:200])
    asset = asset_services.asset_create(actor=actor_for_user(a.owner, a.org), kind="wiki", title="Runbook",
                                        body="Step 1", visibility=Visibility.RESTRICTED, team=None)
    return {"world": world, "team": team, "asset": asset}


@pytest.mark.django_db(transaction=True)
def test_long_team_name_fits_the_pages(seeded, live_server_url, tmp_path):  # noqa: F811
    from playwright.sync_api import sync_playwright

    a, base, asset = seeded["world"]["a"], live_server_url, seeded["asset"]
    name = seeded["team"].name
    assert len(name) == 200
    pages = (("teams", "/console/teams/", "#team-table"), ("memories", "/console/memories/", "#node-filters"),
             ("agents", "/console/agents/", "#agent-create"), ("assets", "/console/assets/", "#asset-filters"),
             ("acl", f"/console/assets/{asset.id}/acl/", "#grant-add"))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            context.set_default_timeout(20_000)
            page = context.new_page()
            console_login(page, base, a.owner.username, "pw-owner-123")
            widths = {}
            for label, path, sel in pages:
                page.goto(f"{base}{path}")
                page.wait_for_selector(sel)
                page.screenshot(path=tmp_path / f"{label}-1280.png", full_page=True)
                assert name in page.content(), label  # the name (or its option) is on the page
                widths[label] = page.evaluate("document.documentElement.scrollWidth")
            context.close()
            assert {k: w for k, w in widths.items() if w > 1280} == {}, widths
        finally:
            browser.close()
