"""The console's one keyset pager (``frontend.selectors.keyset_page``) and its next-page link
(``frontend.views.base.next_page_qs``), which the memory browser, the asset list and the audit
log all use."""

from __future__ import annotations

import pytest
from django.test import RequestFactory

from assets.models import AuditEvent
from frontend.selectors import MAX_PAGE_SIZE, Page, keyset_page
from frontend.views.base import next_page_qs

pytestmark = pytest.mark.django_db


def _events(org, n: int) -> list[int]:
    rows = AuditEvent.objects.bulk_create(
        AuditEvent(org=org, actor_kind="system", actor_label="system", action="test.page", object_type="x",
                   object_id=str(i)) for i in range(n))
    return sorted((r.id for r in rows), reverse=True)


def _qs(org):
    return AuditEvent.objects.filter(org=org, action="test.page")


def test_pages_walk_every_row_once_newest_first(world):
    org = world["a"].org
    ids = _events(org, 25)
    seen, after, pages = [], None, 0
    while True:
        p = keyset_page(_qs(org), after=after, limit=10)
        seen += [r.id for r in p.rows]
        pages += 1
        if p.next_after is None:
            break
        assert p.next_after == p.rows[-1].id
        after = p.next_after
    assert pages == 3 and seen == ids


def test_a_full_last_page_has_no_next_and_limits_are_bounded(world):
    org = world["a"].org
    ids = _events(org, 10)
    p = keyset_page(_qs(org), after=None, limit=10)
    assert [r.id for r in p.rows] == ids and p.next_after is None  # the extra row decides, not the count
    p = keyset_page(_qs(org), after=None, limit=9)
    assert p.next_after == ids[8]
    assert len(keyset_page(_qs(org), after=None, limit=0).rows) == 1
    _events(org, MAX_PAGE_SIZE)
    assert len(keyset_page(_qs(org), after=None, limit=10_000).rows) == MAX_PAGE_SIZE


def test_next_link_keeps_the_filters_and_is_empty_on_the_last_page():
    request = RequestFactory().get("/console/audit/", {"action": "key.", "after": "99"})
    assert next_page_qs(request, Page(rows=[], next_after=42)) == "action=key.&after=42"
    assert next_page_qs(request, Page(rows=[], next_after=None)) == ""
