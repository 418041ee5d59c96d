"""Two tabs of one browser (one session): tab A shows alpha's pages, tab B switches the session to
beta; what tab A then sends (a form's button, a select that submits its form from script, an htmx
request) is refused with the 409 page/fragment and nothing is written in beta or alpha. Reloaded,
tab A is on beta and acts there. Headless Debian chromium against a real uvicorn (test_e2e.py's
fixtures)."""

from __future__ import annotations

import pytest

# The live server, the browser and the ORM-on-a-thread helper of the console's end-to-end test.
from .test_e2e import _in_thread, browser_page, console_login, live_server_url  # noqa: F401

pytestmark = [pytest.mark.slow]

REFUSAL = "This page was for organisation ALPHA; you have since switched to BETA in another tab."



def _state(a, b):
    def read():
        from teams.models import Membership, Team

        return (sorted(Team.objects.filter(name__startswith="Tab").values_list("org__slug", "name")),
                Membership.objects.get(org=a.org, user=a.member).role,
                Membership.objects.get(org=b.org, user=a.member).role)

    return _in_thread(read)


@pytest.mark.django_db(transaction=True)
def test_owner_tab_of_the_org_left_is_refused(two_orgs, live_server_url, browser_page):  # noqa: F811
    a, b = two_orgs["a"], two_orgs["b"]
    base, tab_a = live_server_url, browser_page
    console_login(tab_a, base, a.owner.username, "pw-owner-123")
    tab_a.goto(f"{base}/console/teams/")
    assert tab_a.get_attribute('meta[name="nylon-org"]', "content") == "alpha"

    tab_b = tab_a.context.new_page()
    tab_b.goto(f"{base}/console/")
    with tab_b.expect_navigation():
        tab_b.select_option("#org-switch", "beta")
    assert tab_b.get_attribute('meta[name="nylon-org"]', "content") == "beta"

    # A form's submit button.
    tab_a.fill("#team-create input[name=name]", "Tab team")
    with tab_a.expect_navigation() as nav:
        tab_a.click("#team-create button[type=submit]")
    assert nav.value.status == 409
    assert REFUSAL in tab_a.inner_text("body") and "Reload the page" in tab_a.inner_text("body")

    assert _state(a, b) == ([], "member", "member")


@pytest.mark.django_db(transaction=True)
def test_owner_script_and_htmx_requests_of_the_org_left_are_refused(two_orgs, live_server_url,  # noqa: F811
                                                                    browser_page):  # noqa: F811
    a, b = two_orgs["a"], two_orgs["b"]
    base, tab_a = live_server_url, browser_page
    console_login(tab_a, base, a.owner.username, "pw-owner-123")
    tab_a.goto(f"{base}/console/members/")
    tab_resonate = tab_a.context.new_page()
    tab_resonate.goto(f"{base}/console/resonate/")
    assert tab_resonate.get_attribute('meta[name="nylon-org"]', "content") == "alpha"

    tab_b = tab_a.context.new_page()
    tab_b.goto(f"{base}/console/")
    with tab_b.expect_navigation():
        tab_b.select_option("#org-switch", "beta")

    # The role select sends its form with form.submit() once the change is confirmed.
    tab_a.once("dialog", lambda d: d.accept())
    with tab_a.expect_navigation() as nav:
        tab_a.select_option(f'#member-table tr[data-user="{a.member.username}"] select[name=role]', "admin")
    assert nav.value.status == 409 and REFUSAL in tab_a.inner_text("body")

    # htmx: the playground's form posts with hx-post; the refusal is swapped into its results.
    tab_resonate.fill("#resonate-form textarea[name=query]", "Lisbon")
    with tab_resonate.expect_response(lambda r: r.url.endswith("/console/resonate/")) as resp:
        tab_resonate.click("#resonate-form button[type=submit]")
    assert resp.value.status == 409
    tab_resonate.wait_for_selector("#resonate-results .error")
    assert REFUSAL in tab_resonate.inner_text("#resonate-results")

    assert _state(a, b) == ([], "member", "member")

    # Reloaded, the page is beta's and acts there.
    tab_a.goto(f"{base}/console/teams/")
    tab_a.fill("#team-create input[name=name]", "Tab team")
    with tab_a.expect_navigation():
        tab_a.click("#team-create button[type=submit]")
    assert _state(a, b) == ([("beta", "Tab team")], "member", "member")
