"""Diffs between two asset versions, computed server-side with ``difflib``.

The functions return plain rows (no HTML): the template renders them with auto-escaping, so a
version's text can never inject markup into the console (``difflib.HtmlDiff`` builds HTML strings
we would have to mark safe)."""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher, unified_diff
from itertools import zip_longest

# A version body may hold 100,000 characters; past this many lines per side the diff is cut so a
# pathological pair cannot make one page render slowly (SequenceMatcher is worse than linear).
MAX_LINES = 4000
CONTEXT = 3


@dataclass(frozen=True)
class SideRow:
    kind: str  # equal | replace | delete | insert | skip (the unchanged lines between two hunks)
    left_no: int | None = None
    left: str = ""
    right_no: int | None = None
    right: str = ""


@dataclass(frozen=True)
class UnifiedLine:
    kind: str  # header | hunk | context | del | add
    text: str


@dataclass(frozen=True)
class VersionDiff:
    from_version: int
    to_version: int
    side_by_side: list[SideRow]
    unified: list[UnifiedLine]
    truncated: bool

    @property
    def changed(self) -> bool:
        return bool(self.side_by_side) or any(line.kind in ("add", "del") for line in self.unified)


def version_lines(v) -> list[str]:
    """One comparable text per version: every content field of the hash (title, summary, node ids,
    body), so a diff shows each change that made a new version."""
    lines = [f"title: {v.title}", f"summary: {v.summary}"]
    if v.node_ids:
        lines.append("memories: " + ", ".join(str(i) for i in v.node_ids))
    lines.append("")
    lines.extend(v.body.splitlines())
    return lines


def side_by_side(a: list[str], b: list[str], *, context: int = CONTEXT) -> list[SideRow]:
    if a == b:
        return []
    rows: list[SideRow] = []
    sm = SequenceMatcher(a=a, b=b, autojunk=False)
    # Read before grouping: get_grouped_opcodes trims the cached opcode list in place.
    tail = sm.get_opcodes()[-1]
    for g, group in enumerate(sm.get_grouped_opcodes(context)):
        if g or group[0][1] > 0:
            rows.append(SideRow(kind="skip"))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                rows += [SideRow("equal", i + 1, a[i], j + 1, b[j])
                         for i, j in zip(range(i1, i2), range(j1, j2), strict=True)]
            elif tag == "delete":
                rows += [SideRow("delete", i + 1, a[i], None, "") for i in range(i1, i2)]
            elif tag == "insert":
                rows += [SideRow("insert", None, "", j + 1, b[j]) for j in range(j1, j2)]
            else:
                for i, j in zip_longest(range(i1, i2), range(j1, j2)):
                    rows.append(SideRow("replace", None if i is None else i + 1, "" if i is None else a[i],
                                        None if j is None else j + 1, "" if j is None else b[j]))
    if rows and tail[0] == "equal" and tail[2] - tail[1] > context:
        rows.append(SideRow(kind="skip"))
    return rows


def unified(a: list[str], b: list[str], *, from_label: str, to_label: str,
            context: int = CONTEXT) -> list[UnifiedLine]:
    out: list[UnifiedLine] = []
    for n, line in enumerate(unified_diff(a, b, fromfile=from_label, tofile=to_label, n=context, lineterm="")):
        if n < 2:  # the ---/+++ file header (a body line may itself start with "--")
            out.append(UnifiedLine("header", line))
        elif line.startswith("@@"):
            out.append(UnifiedLine("hunk", line))
        elif line.startswith("-"):
            out.append(UnifiedLine("del", line))
        elif line.startswith("+"):
            out.append(UnifiedLine("add", line))
        else:
            out.append(UnifiedLine("context", line))
    return out


def diff_versions(old, new, *, view: str | None = None) -> VersionDiff:
    """``view`` "split" or "unified" computes only that one (the page shows one); None both."""
    a, b = version_lines(old), version_lines(new)
    truncated = len(a) > MAX_LINES or len(b) > MAX_LINES
    a, b = a[:MAX_LINES], b[:MAX_LINES]
    return VersionDiff(
        from_version=old.version, to_version=new.version,
        side_by_side=side_by_side(a, b) if view != "unified" else [],
        unified=unified(a, b, from_label=f"v{old.version}", to_label=f"v{new.version}") if view != "split" else [],
        truncated=truncated,
    )
