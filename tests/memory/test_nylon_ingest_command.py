"""manage.py nylon_ingest: a JSON-lines file of sessions, checked whole, written in chunks."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from memory.models import Edge, IngestBatch, MemorySession, Node

pytestmark = pytest.mark.django_db


def _file(tmp_path, sessions) -> str:
    p = tmp_path / "in.jsonl"
    p.write_text("".join(json.dumps(s) + "\n" for s in sessions) + "\n")
    return str(p)


def _session(key: str, n: int, **extra) -> dict:
    return {"session_key": key, "turns": [{"speaker": "Ana", "text": f"{key} note {i}: the relay {i} is up.",
                                           "event_id": f"{key}-{i}"} for i in range(n)], **extra}


def _run(*args) -> dict:
    out, err = StringIO(), StringIO()
    call_command("nylon_ingest", *args, stdout=out, stderr=err)
    assert "turns/s" in err.getvalue()  # progress
    return json.loads(out.getvalue())


def test_a_file_is_written_in_chunks_and_a_rerun_writes_nothing(world, tmp_path):
    a = world["a"]
    path = _file(tmp_path, [_session("long", 5, end_session=True), _session("short", 2), _session("mid", 3)])
    out = _run(path, "--org", "alpha", "--agent", a.agent.name, "--no-embed", "--chunk", "2")
    assert out["turns"] == 10 and out["created"] == 10 and out["batches"] == 6 and out["lines"] == 3
    long = list(Node.objects.filter(org=a.org, session_key="long").order_by("seq"))
    assert [n.seq for n in long] == [0, 1, 2, 3, 4] and all(n.owner_agent_id == a.agent.id for n in long)
    assert all(n.source_kind == "import" and not n.embedded for n in long)
    chain = set(Edge.objects.filter(kind="temporal_next", src__session_key="long").values_list("src_id", "dst_id"))
    assert chain == {(x.id, y.id) for x, y in zip(long, long[1:], strict=False)}  # across the chunk borders
    s = MemorySession.objects.get(org=a.org, key="long")
    assert s.turn_count == 5 and s.abstraction_status == "pending"
    again = _run(path, "--org", "alpha", "--agent", a.agent.name, "--no-embed")
    assert again["created"] == 0 and again["existing"] == 10 and again["batches"] == 0
    assert Node.objects.filter(org=a.org).count() == 10


def test_a_bad_line_anywhere_writes_nothing_and_names_the_line(world, tmp_path):
    a, b = world["a"], world["b"]
    good = [_session(f"s{i}", 2) for i in range(3)]
    for bad in ({**_session("x", 1), "colour": "red"},
                {**_session("x", 1), "visibility": "team", "team_id": b.team.id},
                {"session_key": "x", "turns": [{"text": "  "}]}):
        with pytest.raises(CommandError, match="line 4"):
            call_command("nylon_ingest", _file(tmp_path, [*good, bad]), "--org", "alpha", "--agent", a.agent.name,
                         "--no-embed", "--chunk", "2", stdout=StringIO(), stderr=StringIO())
        assert Node.objects.count() == 0


def test_a_member_writes_as_itself_and_an_outsider_cannot(world, tmp_path):
    a = world["a"]
    path = _file(tmp_path, [{**_session("team-notes", 2), "visibility": "team", "team_id": a.team.id}])
    _run(path, "--org", "alpha", "--user", a.member.username, "--no-embed")
    assert set(Node.objects.values_list("owner_user_id", "team_id", "visibility")) == {
        (a.member.id, a.team.id, "team")}
    with pytest.raises(CommandError, match="not a member"):
        call_command("nylon_ingest", path, "--org", "alpha", "--user", world["outsider"].username)
    with pytest.raises(CommandError, match="No active agent"):
        call_command("nylon_ingest", path, "--org", "alpha", "--agent", world["b"].agent.name)


def test_enrich_runs_the_deferred_work_in_process(world, tmp_path):
    a = world["a"]
    out = _run(_file(tmp_path, [_session("ops", 3)]), "--org", "alpha", "--agent", a.agent.name, "--no-embed",
               "--enrich")
    assert out["enriched"] is True
    assert list(IngestBatch.objects.values_list("status", "embed_pending")) == [("done", False)]
    assert Node.objects.filter(embedded=True).count() == 3
