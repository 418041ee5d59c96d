"""What a write's heuristic silks (entities, key terms, emotion, time expressions), and the rule-based
conflict check its worker runs after it, cost on long adversarial turns, beside an ordinary text of
the same length in the same run.

    .venv/bin/python bench/silks_cost.py [--reps 3]

Each row: a 20,000-character turn (the API's limit), the median of ``--reps`` runs of
``memory.engine.weave.weave_silks`` and its ratio to the control row (ordinary prose). A row far
above the others is a text whose cost grows faster than its length (the security review's
"Monday " x 2,850 took 30 s before the time mentions were bounded)."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory.engine.text import extract_entities  # noqa: E402
from memory.engine.weave import weave_silks  # noqa: E402
from reflection.heuristics import conflict_reason  # noqa: E402

LIMIT = 20_000
TEXTS = {
    "control: ordinary prose": "The release train leaves on Thursday and Ana reviews the notes. ",
    "a weekday repeated": "Monday ",
    "a day and month repeated": "on 5 May ",
    "one long word": "a",
    "capitalised names": "Alpha Beta ",
    "change verbs": "move ",
    "versions": "v1.2.3 ",
    "quotes": '"x" ',
    "one-line sentences": "Hi.\n",
    "a dated decision repeated": "Ana said on Monday that Ben will move the Q4 freeze to December 7. ",
    "change verbs with 'off'": "moved CI off ",
    "hand-overs": "took over ",
    "moves in one clause": "moved the standup to Friday and ",
    "'now' dates in one clause": "the freeze now starts December 7 and ",
    "value contrasts": "the Pro plan at $39 per seat, not $35, ",
    "bans over periods": "no deploys from Friday Nov 20 through Monday Nov 30. ",
    "periods given 'now'": "the freeze now runs from Nov 24 to Dec 2, so ",
    "unit contrasts": "tokens expire after 60 minutes, not 15 minutes, ",
    "values with units and how": "the webhook retries 5 times with backoff and ",
    "switches from a name": "we switched the CI runner from GitHub Actions to ",
}
STATEMENT = "The ledger database is PostgreSQL 15."


def _conflict_check(text: str) -> None:
    for a, b in ((text, STATEMENT), (STATEMENT, text)):
        conflict_reason(a, b, extract_entities(a), extract_entities(b))


def _conflict_self(text: str) -> None:
    conflict_reason(text, text, extract_entities(text), extract_entities(text))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    at = datetime(2026, 11, 20, 10, tzinfo=UTC)
    for title, work in (("silks (in the write request)", lambda text: weave_silks(text, occurred_at=at)),
                        ("conflict check of a pair, both ways (worker)", _conflict_check),
                        ("conflict check of the text against itself (both sides long)", _conflict_self)):
        rows = []
        for name, unit in TEXTS.items():
            text = (unit * (LIMIT // len(unit) + 1))[:LIMIT]
            times = []
            for _ in range(args.reps):
                t = time.perf_counter()
                work(text)
                times.append(time.perf_counter() - t)
            rows.append((name, statistics.median(times)))
        base = rows[0][1]
        print(title)
        print(f"  {'20,000 characters of':<28}{'median ms':>11}{'x control':>11}")
        for name, t in rows:
            print(f"  {name:<28}{t * 1000:>11.1f}{t / base:>11.1f}")


if __name__ == "__main__":
    main()
