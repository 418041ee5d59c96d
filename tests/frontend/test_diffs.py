"""Version diffs (frontend.diffs): difflib rows, rendered by the template with auto-escaping."""

from __future__ import annotations

from dataclasses import dataclass, field

from frontend import diffs


@dataclass
class V:
    version: int
    body: str
    title: str = "Runbook"
    summary: str = ""
    node_ids: list[int] = field(default_factory=list)


def test_side_by_side_pairs_changes_and_elides_unchanged_runs():
    a = [f"line {i}" for i in range(20)]
    b = list(a)
    b[10] = "line ten"
    b.insert(15, "inserted")
    del b[2]
    rows = diffs.side_by_side(a, b)
    kinds = [r.kind for r in rows]
    assert kinds.count("replace") == 1 and kinds.count("insert") == 1 and kinds.count("delete") == 1
    rep = next(r for r in rows if r.kind == "replace")
    assert (rep.left_no, rep.left, rep.right_no, rep.right) == (11, "line 10", 10, "line ten")
    ins = next(r for r in rows if r.kind == "insert")
    assert ins.left_no is None and ins.right == "inserted"
    # unchanged stretches longer than the context are folded into one "skip" row each
    assert kinds[-1] == "skip" and "line 19" not in {r.left for r in rows}
    assert diffs.side_by_side(a, list(a)) == []


def test_replace_of_unequal_blocks_pads_the_shorter_side():
    rows = diffs.side_by_side(["a", "b"], ["x"])
    assert [(r.left, r.right, r.right_no) for r in rows] == [("a", "x", 1), ("b", "", None)]


def test_unified_marks_headers_hunks_and_lines_even_for_dashed_bodies():
    out = diffs.unified(["-- keep", "old"], ["-- keep", "new"], from_label="v1", to_label="v2")
    assert [(x.kind, x.text) for x in out] == [
        ("header", "--- v1"), ("header", "+++ v2"), ("hunk", "@@ -1,2 +1,2 @@"),
        ("context", " -- keep"), ("del", "-old"), ("add", "+new")]


def test_diff_versions_covers_every_hashed_field_and_caps_long_bodies():
    d = diffs.diff_versions(V(1, "same", summary="s1", node_ids=[1]), V(2, "same", summary="s2", node_ids=[1, 2]))
    changed = {(r.left, r.right) for r in d.side_by_side if r.kind == "replace"}
    assert ("summary: s1", "summary: s2") in changed and ("memories: 1", "memories: 1, 2") in changed
    assert d.changed and not d.truncated and (d.from_version, d.to_version) == (1, 2)
    long = "\n".join(str(i) for i in range(diffs.MAX_LINES + 10))
    d = diffs.diff_versions(V(1, long), V(2, long + "\nmore"))
    assert d.truncated and not d.changed  # the change lies past the cap: said, not computed
