"""Dates in table cells stay on one line: at phone width "2026-12-01" wrapped at its hyphens in the
members, agents and key tables."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db

DATE_CELL = re.compile(r"<td([^>]*)>\s*\d{4}-\d{2}-\d{2}")


@pytest.mark.parametrize("path", ["/console/members/", "/console/agents/", "agent"])
def test_date_cells_do_not_wrap(world, login, path):
    a = world["a"]
    c = login(a.owner)
    if path == "agent":
        c.post(f"/console/agents/{a.agent.id}/", {"op": "key", "name": "k", "scopes": ["read"]})
        path = f"/console/agents/{a.agent.id}/"
    html = c.get(path).content.decode()
    cells = DATE_CELL.findall(html)
    assert cells, path  # the premise: the page has date cells
    assert all("nowrap" in attrs for attrs in cells), (path, cells)
