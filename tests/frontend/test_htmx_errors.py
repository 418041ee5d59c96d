"""htmx requests get an error fragment, never a whole page: the console's htmx config swaps 400
and 403 responses into the target (base.html ``responseHandling``), so a full page (its own
<html>, head and shell) would be nested inside the drawer or the list."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def _fragment(r) -> str:
    html = r.content.decode()
    assert "<html" not in html and "<body" not in html
    assert 'class="error"' in html
    return html


def test_refusal_of_an_htmx_request_is_a_403_fragment(world, login):
    r = login(world["a"].member).get("/console/audit/", **HX)
    assert r.status_code == 403
    _fragment(r)


def test_refused_htmx_post_is_a_403_fragment(world, login, mem):
    r = login(world["a"].member).post(f"/console/memories/{mem.owner_org}/delete", **HX)
    assert r.status_code == 403
    _fragment(r)


def test_htmx_request_without_an_org_is_a_403_fragment(world, login):
    r = login(world["outsider"]).get("/console/memories/?partial=rows", **HX)
    assert r.status_code == 403
    _fragment(r)


@pytest.mark.parametrize("url", ["/console/memories/?partial=rows&after=abc",
                                 "/console/assets/?partial=rows&limit=0"])
def test_invalid_filters_of_a_rows_fragment_are_a_400_fragment(world, login, url):
    r = login(world["a"].owner).get(url, **HX)
    assert r.status_code == 400
    _fragment(r)


def test_the_full_page_still_renders_its_form_errors(world, login):
    r = login(world["a"].owner).get("/console/memories/?after=abc")
    assert r.status_code == 400 and "<html" in r.content.decode()
