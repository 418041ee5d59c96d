"""Destructive console actions ask first, one way (data-confirm, console.js), in a real browser
(Debian chromium against uvicorn, the fixtures of test_e2e.py). Before: a member's role changed the
moment the select changed, and a team member's "Remove" asked nothing. Also the agent page of an
agent with no team (no stray "·", the Deactivate card level with the others)."""

from __future__ import annotations

import pytest

from .test_e2e import CHROMIUM, CHROMIUM_ARGS, _in_thread, console_login, live_server_url  # noqa: F401

pytestmark = [pytest.mark.slow]


@pytest.fixture
def seeded(world):
    from memory import services
    from memory.models import Visibility
    from teams.auth import actor_for_agent
    from teams.models import Agent, Team

    a = world["a"]
    temp = Team.objects.create(org=a.org, name="Temp", slug="temp")
    bot = Agent.objects.create(org=a.org, name="temp-bot", team=temp, default_visibility="team")
    services.weave_session(actor=actor_for_agent(bot, scopes=frozenset({"read", "write"})), visibility=Visibility.TEAM,
                           turns=[services.TurnIn(text="Temp runbook lives in the wiki.")])
    world["temp"] = temp.id
    world["loner"] = Agent.objects.create(org=a.org, name="loner").id
    return world


@pytest.fixture
def page(tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        context.set_default_timeout(20_000)
        pg = context.new_page()
        pg.shots = tmp_path
        yield pg
        context.close()
        browser.close()


class Dialogs:
    """Answers the page's confirm() dialogs with the next answer, recording their messages."""

    def __init__(self, page):
        self.messages: list[str] = []
        self.answers: list[bool] = []
        page.on("dialog", self._on)

    def _on(self, dialog):
        self.messages.append(dialog.message)
        dialog.accept() if (self.answers.pop(0) if self.answers else False) else dialog.dismiss()


def _role(org, user) -> str:
    from teams.models import Membership

    return _in_thread(lambda: Membership.objects.get(org=org, user=user).role)


@pytest.mark.django_db(transaction=True)
def test_destructive_actions_ask_first(seeded, live_server_url, page):  # noqa: F811
    from teams.models import Team, TeamMembership

    a, base = seeded["a"], live_server_url
    dialogs = Dialogs(page)
    console_login(page, base, a.owner.username, "pw-owner-123")

    # A member's role: no answer, no change, and the select shows the saved role again.
    page.goto(f"{base}/console/members/")
    select = page.locator(f"tr[data-user='{a.member.username}'] select[name=role]")
    select.select_option("admin")
    page.wait_for_timeout(300)
    assert dialogs.messages[-1] == f"Change the role of {a.member.username} to Admin?"
    assert select.input_value() == "member" and _role(a.org, a.member) == "member"
    dialogs.answers.append(True)
    with page.expect_navigation():
        select.select_option("admin")
    assert _role(a.org, a.member) == "admin"

    # A team member's "Remove" asks too.
    page.goto(f"{base}/console/teams/{a.team.id}/")
    page.click("#team-members button:has-text('Remove')")
    page.wait_for_timeout(300)
    assert dialogs.messages[-1] == f"Remove {a.member.username} from team {a.team.name}?"
    assert _in_thread(lambda: TeamMembership.objects.filter(team=a.team, user=a.member).exists())

    # Deleting a team says what happens, with the counts and the team chosen.
    page.goto(f"{base}/console/teams/{seeded['temp']}/")
    page.check("#team-delete input[value=move]")
    page.select_option("#id_to_team", label=a.team.name)
    page.screenshot(path=page.shots / "team-delete.png", full_page=True)
    page.click("#team-delete button.danger")
    page.wait_for_timeout(300)
    assert dialogs.messages[-1].startswith(
        f"1 memory and 0 assets shared with it move to team {a.team.name}, whose members will read them. "
        "Delete team Temp? Its agent temp-bot leaves it")
    assert _in_thread(lambda: Team.objects.filter(id=seeded["temp"]).exists())
    dialogs.answers.append(True)
    with page.expect_navigation():
        page.click("#team-delete button.danger")
    assert "moved to team" in page.inner_text(".messages")
    assert not _in_thread(lambda: Team.objects.filter(id=seeded["temp"]).exists())


@pytest.mark.django_db(transaction=True)
def test_agent_page_without_a_team(seeded, live_server_url, page):  # noqa: F811
    a, base = seeded["a"], live_server_url
    console_login(page, base, a.owner.username, "pw-owner-123")
    page.goto(f"{base}/console/agents/{seeded['loner']}/")
    page.screenshot(path=page.shots / "agent.png", full_page=True)
    summary = page.inner_text("#agent-summary").strip()
    assert summary.startswith("No team · Writes that name no visibility"), summary
    tops = [page.locator(sel).bounding_box()["y"] for sel in
            ("#key-create", "#agent-sharing-form", "section.grid > .danger-zone")]
    assert max(tops) - min(tops) < 1, tops
