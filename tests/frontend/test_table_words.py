"""Table cells keep their words whole at desktop and phone widths, in a real browser (chromium
against uvicorn, the fixtures of test_e2e.py). Before: ``td { overflow-wrap:anywhere }`` let the
table squeeze every column below its longest word, so the memory browser showed "Platfor m" and
"dat/ab/ase" at 1400 px. Free text (td.text) may still break anywhere, so a 3,000-letter word
never widens the page. Screenshots go to a temporary directory."""

from __future__ import annotations

import pytest

from .test_e2e import CHROMIUM, CHROMIUM_ARGS, console_login, live_server_url  # noqa: F401

pytestmark = [pytest.mark.slow]

# Every word (between spaces, hyphens and slashes) of the cells outside td.text (and outside the scrolled-away part of a phone's table)
# that the browser laid out on more than one line: "cell text: word".
BROKEN_WORDS = """(sel) => {
  const out = [];
  for (const td of document.querySelectorAll(sel)) {
    if (td.closest('td.text') || td.matches('.text')) continue;
    const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      for (const m of n.textContent.matchAll(/[^\\s\\-\\/]+/g)) {  // a break after a hyphen or slash is fine
        const r = document.createRange();
        r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
        const lines = new Set([...r.getClientRects()].filter(b => b.width > 0).map(b => Math.round(b.top)));
        if (lines.size > 1) out.push(td.textContent.trim().slice(0, 40) + ': ' + m[0]);
      }
    }
  }
  return out;
}"""


@pytest.fixture
def seeded(world):
    from memory import services
    from memory.models import Visibility
    from teams.auth import actor_for_user
    from teams.models import Team, TeamMembership

    a = world["a"]
    platform = Team.objects.create(org=a.org, name="Platform", slug="platform",
                                   description="Owns the database, the deployment pipeline and observability.")
    TeamMembership.objects.create(org=a.org, team=platform, user=a.owner)
    owner = actor_for_user(a.owner, a.org)
    text = ("The Platform team moved the production database to the new cluster on Tuesday; replication lag "
            "stayed under two seconds and the rollback plan was never needed.")
    for i in range(6):
        services.weave_session(actor=owner, visibility=Visibility.TEAM, team=platform,
                               turns=[services.TurnIn(text=f"{text} ({i})", speaker="Ana")])
    services.weave_session(actor=owner, visibility=Visibility.ORG, turns=[services.TurnIn(text="A" * 3000)])
    return world


def _open(browser, base, user, width, height):
    ctx = browser.new_context(viewport={"width": width, "height": height})
    ctx.set_default_timeout(20_000)
    page = ctx.new_page()
    console_login(page, base, user.username, "pw-owner-123")
    return ctx, page


@pytest.mark.django_db(transaction=True)
def test_words_stay_whole_in_table_cells(seeded, live_server_url, tmp_path):  # noqa: F811
    from playwright.sync_api import sync_playwright

    a, base = seeded["a"], live_server_url
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        for width, height in ((1400, 900), (390, 844)):
            ctx, page = _open(browser, base, a.owner, width, height)
            for name, path in (("memories", "/console/memories/"), ("teams", "/console/teams/"),
                               ("members", "/console/members/"), ("audit", "/console/audit/"),
                               ("agents", "/console/agents/")):
                page.goto(f"{base}{path}")
                page.screenshot(path=tmp_path / f"{name}-{width}.png", full_page=True)
                assert page.evaluate(BROKEN_WORDS, "table.rows td") == [], (name, width)
                wide = page.evaluate("document.documentElement.scrollWidth")
                assert wide <= width, (name, width, wide)
            ctx.close()
        browser.close()
