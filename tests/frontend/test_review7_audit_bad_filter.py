"""An invalid Audit filter answers 400 with the error and no table, as Memories and Assets do.
Before, one bad date dropped every other filter and the whole log was listed under them."""

from __future__ import annotations

import pytest

from assets.models import AuditEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def events(world):
    a = world["a"]
    AuditEvent.objects.create(org=a.org, actor_label="alpha-owner", action="team.create", object_type="team",
                              object_id="1",
                              actor_kind="user", outcome="done")
    AuditEvent.objects.create(org=a.org, actor_label="alpha-owner", action="key.revoke", object_type="key",
                              object_id="2", actor_kind="user", outcome="done")


@pytest.mark.parametrize("query", ["action=team.create&since=2026-02-31", "action=team.create&until=nope",
                                   "outcome=maybe", "after=0"])
def test_an_invalid_filter_is_a_400_with_the_error_and_no_rows(query, world, events, login):
    r = login(world["a"].admin).get(f"/console/audit/?{query}")
    html = r.content.decode()
    assert r.status_code == 400
    assert 'id="audit-table"' not in html
    assert "<code>key.revoke</code>" not in html and "<code>team.create</code>" not in html
    errors = html.split('id="audit-filters"', 1)[1].split("</form>", 1)[0]
    assert 'class="error"' in errors
    # What was typed stays in the filter form, to be corrected.
    if "action=team.create" in query:
        assert 'value="team.create"' in errors


def test_the_bad_date_error_is_shown(world, events, login):
    html = login(world["a"].admin).get("/console/audit/?action=team.create&since=2026-02-31").content.decode()
    assert "Enter a valid date." in html and 'value="2026-02-31"' in html


def test_valid_filters_still_list_the_matching_rows(world, events, login):
    r = login(world["a"].admin).get("/console/audit/?action=team.create&since=2020-01-01")
    html = r.content.decode()
    assert r.status_code == 200 and "<code>team.create</code>" in html and "<code>key.revoke</code>" not in html
