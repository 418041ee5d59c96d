"""How often the engine and its dense float64 reference disagree on random mutated tenants: the
property test (tests/engine/test_property_updates.py) draws 80 cases per run; this draws many more,
so a disagreement that is rare per run shows up with its rate. Prints the count and the first cases.

    .venv/bin/python bench/engine_vs_reference.py [--cases 3000] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from memory.engine import ResonateParams, resonate  # noqa: E402
from tests.engine._reference import ref_resonate  # noqa: E402
from tests.engine.test_property_updates import DIM, WORDS, _build  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    draw = random.Random(args.seed)
    bad: list[tuple] = []
    t = time.perf_counter()
    for _ in range(args.cases):
        case = (draw.randrange(2**32), draw.randint(1, 12), draw.randint(0, 12), draw.randint(0, 3),
                draw.choice([1, 3, 100]), draw.randint(1, 2), draw.random() < 0.5)
        seed, n, n_ops, depth, k, owner, with_vec = case
        rng = np.random.default_rng(seed)
        idx, _, _, _ = _build(rng, n, n_ops)
        params = ResonateParams(depth=depth, k=k, n_lex=5, n_vec=5, n_win=5, n_wvec=5, max_activated=6)
        allowed = idx.visibility_mask(owner_keys=[owner], team_ids=[1])
        q = " ".join(rng.choice(WORDS, size=2))
        qvec = rng.normal(size=DIM) if with_vec else None
        got = resonate(idx, query_text=q, query_vec=qvec, allowed=allowed, params=params, now_days=12.0)
        ref = ref_resonate(idx, q, qvec, allowed, params, 12.0)
        same = [h.node_id for h in got.hits] == [r[0] for r in ref] and np.allclose(
            [h.score for h in got.hits], [r[1] for r in ref], rtol=1e-6, atol=1e-6)
        if not same:
            bad.append(case)
    print(f"{len(bad)} of {args.cases} random tenants rank differently from the reference "
          f"({time.perf_counter() - t:.1f} s)")
    for case in bad[:5]:
        print("  seed, n, n_ops, depth, k, owner, with_vec =", case)


if __name__ == "__main__":
    main()
