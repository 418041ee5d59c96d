"""Filters that show stored structures to people: no Python reprs on the console's pages."""

from __future__ import annotations

import re
from datetime import date

from django import template
from django.utils.dateformat import format as date_format
from django.utils.translation import gettext as _

register = template.Library()

MAX_ITEMS = 12  # of a list in an audit detail; the rest is counted


def _day(value) -> date | None:
    try:
        return date.fromisoformat(str(value)[:10])
    except ValueError:
        return None


def _span(start: date, end: date) -> str:
    if start == end:
        return date_format(start, "j F Y")
    if (start.year, start.month) == (end.year, end.month):
        return f"{date_format(start, 'j')}–{date_format(end, 'j F Y')}"
    if start.year == end.year:
        return f"{date_format(start, 'j F')} – {date_format(end, 'j F Y')}"
    return f"{date_format(start, 'j F Y')} – {date_format(end, 'j F Y')}"


@register.filter
def time_ref(ref) -> str:
    """A resolved time expression (``Node.time_refs`` item: surface, start, end, granularity) as
    people say it: "9 January 2027", "7–13 December 2026", "March 2027", "2027"."""
    if not isinstance(ref, dict):
        return str(ref)
    start, end = _day(ref.get("start")), _day(ref.get("end"))
    if start is None or end is None:
        return str(ref.get("surface") or "")
    granularity = ref.get("granularity")
    if granularity == "year" and (start.month, start.day, end.month, end.day) == (1, 1, 12, 31) \
            and start.year == end.year:
        when = str(start.year)
    elif granularity == "month" and start.day == 1 and (start.year, start.month) == (end.year, end.month):
        when = date_format(start, "F Y")
    else:
        when = _span(start, end)
    surface = str(ref.get("surface") or "").strip()
    if surface and surface.casefold() != when.casefold():
        return _("“%(surface)s”: %(when)s") % {"surface": surface, "when": when}
    return when


def _value(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return _("yes") if value else _("no")
    if isinstance(value, dict):
        return "(" + audit_detail(value) + ")" if value else "—"
    if isinstance(value, list | tuple):
        if not value:
            return "—"
        shown = ", ".join(_value(v) for v in value[:MAX_ITEMS])
        more = len(value) - MAX_ITEMS
        return shown + (" " + _("and %(n)s more") % {"n": more} if more > 0 else "")
    if isinstance(value, str) and _ISO_TIME.fullmatch(value):
        # "2026-12-01T04:33:16.728801+00:00" as the log's other times read: "2026-12-01 04:33 UTC"
        return f"{value[:10]} {value[11:16]} UTC" if value.endswith(("+00:00", "Z")) else value[:16].replace("T", " ")
    return str(value)


_ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2})?")


@register.filter
def audit_detail(detail) -> str:
    """An audit entry's detail as one readable line: ``{'grantee': 'user:4', 'permission': 'read'}``
    becomes "grantee user:4 · permission read"; lists are comma-separated, nested objects in
    parentheses, booleans yes/no, nothing "—"."""
    if not detail:
        return ""
    if not isinstance(detail, dict):
        return _value(detail)
    return " · ".join(f"{str(k).replace('_', ' ')} {_value(v)}" for k, v in detail.items())


@register.simple_tag(takes_context=True)
def team_memories_out_of_reach(context) -> int | None:
    """The count behind the "N more memories are shared within teams you are not in" hint of the
    dashboard and the memory browser (``frontend.selectors.team_memories_out_of_reach``)."""
    from ..selectors import team_memories_out_of_reach as count

    actor = context.get("actor")
    return count(actor=actor) if actor is not None else None
