"""The resonate playground says when nothing matches the query and dates and names each hit, as the
context does: "What backup processor did payments choose?" listed ten unrelated memories as if they
answered it, each without when it happened or who said it."""

from __future__ import annotations

import re

import pytest

from tests.assets.helpers import weave

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]

MEMORIES = [("ana", "The CI pipeline takes twelve minutes on main."), ("ben", "Run the linter before every commit."),
            ("chloe", "We migrated production to Postgres 16 last night."),
            ("dev", "Deploys go out on Tuesdays at 14:00 UTC."), ("ana", "The staging cluster has three nodes."),
            ("ben", "Feature flags live in the config service.")]


def _seed(world, client_for) -> dict[str, int]:
    c = client_for(world["a"].member)
    return {text: weave(c, text, visibility="org", session=f"s{i}", speaker=who,
                        occurred_at=f"2026-11-{10 + i:02d}T09:00:00Z")
            for i, (who, text) in enumerate(MEMORIES)}


def _hits_html(login, world, query: str) -> str:
    r = login(world["a"].member).post("/console/resonate/", {"query": query, "k": 10}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    return r.content.decode()


def test_nothing_matching_is_said_and_each_hit_has_its_date_and_speaker(world, client_for, login):
    _seed(world, client_for)
    html = _hits_html(login, world, "What backup processor did payments choose?")
    assert 'id="no-match"' in html and "No stored memory matches this query" in html
    items = re.findall(r'<li class="hit">(.*?)</li>', html, re.S)
    assert len(items) == len(MEMORIES)
    for item in items:
        meta = re.search(r'class="muted hit-meta">\[([^\]]*)\]', item)
        assert meta, item
        date, _, speaker = meta.group(1).partition(" · ")
        assert re.fullmatch(r"2026-11-1\d", date) and speaker in {"ana", "ben", "chloe", "dev"}, meta.group(1)
        assert "hit-unmatched" in item


def test_a_matching_query_gets_no_warning(world, client_for, login):
    ids = _seed(world, client_for)
    html = _hits_html(login, world, "How long does the CI pipeline take?")
    assert 'id="no-match"' not in html
    first = re.search(r'<li class="hit">(.*?)</li>', html, re.S).group(1)
    assert f"/console/memories/{ids[MEMORIES[0][1]]}/" in first and "hit-unmatched" not in first
    assert "[2026-11-10 · ana]" in first


def test_an_empty_memory_says_nothing_resonated_without_the_nearest_memories_warning(world, login):
    html = _hits_html(login, world, "What backup processor did payments choose?")
    assert "Nothing resonated." in html and 'id="no-match"' not in html


def test_a_disputed_pair_is_tagged_and_the_scores_read_in_list_order(world, client_for, login):
    """The playground listed the newer side of an open conflict first (as the context does) but with
    its raw score, below the one under it (0.0807 above 0.0808), and without the context's
    "disputed by" tag."""
    from assets.context import recall_for
    from reflection.models import Conflict
    from teams.auth import actor_for_user

    c = client_for(world["a"].member)
    old = weave(c, "The Lisbon offsite is on March 14, the Lisbon offsite venue is booked.", visibility="org",
                session="s1", speaker="ana", occurred_at="2026-11-10T09:00:00Z")
    new = weave(c, "Update: moved it to March 21.", visibility="org", session="s2", speaker="ana",
                occurred_at="2026-11-20T09:00:00Z")
    Conflict.objects.create(org=world["a"].org, node_a_id=old, node_b_id=new, reason="rescheduled", detector="rule")
    query = "When is the Lisbon offsite?"
    hits = recall_for(actor=actor_for_user(world["a"].member, world["a"].org), query=query, k=10).hits
    assert [h.node_id for h in hits[:2]] == [new, old] and hits[0].score < hits[1].score  # moved up
    html = _hits_html(login, world, query)
    items = re.findall(r'<li class="hit">(.*?)</li>', html, re.S)
    shown = [float(re.search(r'<span class="score">([\d.]+)</span>', it).group(1)) for it in items]
    assert shown == sorted(shown, reverse=True), shown
    assert f"/console/memories/{new}/" in items[0] and "hit-disputed" in items[0] and f"#{old}</a>" in items[0]
    assert f"/console/memories/{old}/" in items[1] and "hit-disputed" in items[1] and f"#{new}</a>" in items[1]
