"""Member invitations end to end, in headless Debian chromium against a real uvicorn (the fixtures
of test_e2e.py): an owner invites on the Members page, a new email sets a password in a fresh
browser and works in the org; an account of another org signs in from the link, accepts and
switches between its two orgs."""

from __future__ import annotations

import re

import pytest

# The live server, the browser and the ORM-on-a-thread helper of the console's end-to-end test.
from .test_e2e import _in_thread, browser_page, live_server_url  # noqa: F401

pytestmark = [pytest.mark.slow]

NEW_EMAIL = "Newcomer@Example.com"
NEW_PASSWORD = "a-long-enough-password-42"
ORG_MEMORY = "Everyone: the Lisbon offsite is on March 14."
OWNER_PRIVATE = "Owner-only: the Lisbon salary review."
BETA_MEMORY = "Beta only: the Porto retreat is in May."


@pytest.fixture
def memories(world):
    """Data first: once Playwright runs, its event loop makes the ORM refuse this thread."""
    from memory import services
    from memory.models import Visibility
    from teams.auth import actor_for_user

    a, b = world["a"], world["b"]
    owner = actor_for_user(a.owner, a.org)
    services.weave_session(actor=owner, turns=[services.TurnIn(text=ORG_MEMORY, speaker="Ana")],
                           visibility=Visibility.ORG)
    services.weave_session(actor=owner, turns=[services.TurnIn(text=OWNER_PRIVATE, speaker="Ana")],
                           visibility=Visibility.PRIVATE)
    services.weave_session(actor=actor_for_user(b.owner, b.org), visibility=Visibility.ORG,
                           turns=[services.TurnIn(text=BETA_MEMORY, speaker="Bo")])
    return world


def _sign_in(page, username: str, password: str) -> None:
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")


def _invite(page, base: str, email: str) -> str:
    """Invites ``email`` as a member on the Members page; returns the link the page shows."""
    page.goto(f"{base}/console/members/")
    page.fill("#member-add input[name=email]", email)
    page.select_option("#member-add select[name=role]", "member")
    page.click("#member-add button[type=submit]")
    page.wait_for_selector("#invite-link-value")
    assert f"{email} invited." in page.inner_text("ul.messages")
    link = page.inner_text("#invite-link-value").strip()
    assert re.fullmatch(re.escape(base) + r"/invite/[A-Za-z0-9_-]{43}", link), link
    return link


def _pending(page) -> str:
    return page.inner_text("#invitation-table")


@pytest.mark.django_db(transaction=True)
def test_invite_a_new_email_and_an_account_of_another_org(memories, live_server_url, browser_page):  # noqa: F811
    a, b = memories["a"], memories["b"]
    base, owner = live_server_url, browser_page
    browser = owner.context.browser

    owner.goto(f"{base}/login/")
    _sign_in(owner, a.owner.username, "pw-owner-123")
    owner.wait_for_url(f"{base}/console/")

    # --- a new email: the link is shown once, the invitee sets a password -------------------------
    link = _invite(owner, base, NEW_EMAIL)
    assert NEW_EMAIL in _pending(owner)
    owner.goto(f"{base}/console/members/")  # shown once: never again, only the pending row
    assert owner.locator("#invite-link-value").count() == 0 and link not in owner.content()
    assert NEW_EMAIL in _pending(owner)

    newcomer_ctx = browser.new_context(viewport={"width": 1360, "height": 900})
    newcomer = newcomer_ctx.new_page()
    newcomer.goto(link)
    newcomer.wait_for_selector("#invite-signup")
    assert "Join ALPHA" in newcomer.inner_text("#invite") and NEW_EMAIL in newcomer.inner_text("#invite")
    newcomer.fill("#invite-signup input[name=password]", NEW_PASSWORD)
    newcomer.fill("#invite-signup input[name=password_again]", NEW_PASSWORD)
    newcomer.click("#invite-signup button[type=submit]")
    newcomer.wait_for_url(f"{base}/console/")
    assert newcomer.inner_text("header.top .org-name") == "ALPHA"  # one org: its name, no switcher
    assert newcomer.inner_text("header.top .user") == "newcomer · member"  # the name the form offered
    assert "Welcome, newcomer: you joined ALPHA as Member." in newcomer.inner_text("ul.messages")
    newcomer.goto(f"{base}/console/memories/")
    newcomer.wait_for_selector("tr.node-row")
    rows = newcomer.inner_text("#node-rows")
    assert ORG_MEMORY in rows
    assert OWNER_PRIVATE not in rows and BETA_MEMORY not in rows
    # The link is used up, even in the browser that used it.
    assert newcomer.goto(link).status == 410
    newcomer_ctx.close()

    owner.goto(f"{base}/console/members/")
    assert NEW_EMAIL not in _pending(owner)
    assert owner.locator('#member-table tr[data-user="newcomer"]').count() == 1

    # --- an account of another org: sign in from the link, come back, accept, switch ---------------
    link = _invite(owner, base, b.member.email)
    guest_ctx = browser.new_context(viewport={"width": 1360, "height": 900})
    guest = guest_ctx.new_page()
    guest.goto(link)
    guest.wait_for_url(re.compile(re.escape(f"{base}/login/?next=")))
    _sign_in(guest, b.member.username, "pw-member-123")
    guest.wait_for_url(link)
    guest.wait_for_selector("#invite-accept")
    assert "Join ALPHA" in guest.inner_text("#invite")
    guest.click("#invite-accept")
    guest.wait_for_url(f"{base}/console/")
    # Two orgs now: the switcher, on the one just joined (the choice of this browser session).
    assert guest.eval_on_selector("#org-switch", "s => s.options[s.selectedIndex].text") == "ALPHA"
    assert sorted(guest.eval_on_selector_all("#org-switch option", "os => os.map(o => o.value)")) == ["alpha", "beta"]
    guest.goto(f"{base}/console/memories/")
    guest.wait_for_selector("tr.node-row")
    assert ORG_MEMORY in guest.inner_text("#node-rows") and BETA_MEMORY not in guest.inner_text("#node-rows")
    for slug, name, seen, unseen in (("beta", "BETA", BETA_MEMORY, ORG_MEMORY),
                                     ("alpha", "ALPHA", ORG_MEMORY, BETA_MEMORY)):
        with guest.expect_navigation():
            guest.select_option("#org-switch", slug)
        guest.wait_for_selector("tr.node-row")
        assert guest.eval_on_selector("#org-switch", "s => s.options[s.selectedIndex].text") == name
        rows = guest.inner_text("#node-rows")
        assert seen in rows and unseen not in rows
    guest_ctx.close()

    owner.goto(f"{base}/console/members/")
    assert b.member.email not in _pending(owner)
    assert owner.locator(f'#member-table tr[data-user="{b.member.username}"]').count() == 1

    def in_db():
        from assets.models import AuditEvent
        from teams.models import Invitation, Membership

        roles = dict(Membership.objects.filter(org=a.org).values_list("user__username", "role"))
        statuses = {i.email: i.status for i in Invitation.objects.filter(org=a.org)}
        actions = sorted(AuditEvent.objects.filter(org=a.org, action__startswith="member.invite")
                         .values_list("action", flat=True))
        return roles, statuses, actions

    roles, statuses, actions = _in_thread(in_db)
    assert roles["newcomer"] == "member" and roles[b.member.username] == "member"
    assert statuses == {NEW_EMAIL: "accepted", b.member.email: "accepted"}
    assert actions == ["member.invite", "member.invite", "member.invite_accept", "member.invite_accept"]
