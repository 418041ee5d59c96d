"""Faults under load, end to end (bench/faults.py in its quick form): kill -9 the web process and
the Celery worker, restart Redis, crash-restart Postgres, all private instances started by the
script (never the shared Redis or dev database). Every acknowledged write must be present exactly
once, no fact duplicated, and the service healthy again without anyone touching it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.worker]


@pytest.mark.timeout(480)
def test_acknowledged_writes_survive_kills_and_restarts(tmp_path):
    out = tmp_path / "faults.json"
    proc = subprocess.run(
        [sys.executable, "bench/faults.py", "--phase-secs", "5", "--redis-down-secs", "2", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=450,
    )
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    s = json.loads(out.read_text())
    detail = json.dumps(s, indent=1)[:4000] + proc.stdout[-2000:]
    assert s["acked"] > 10, detail
    assert s["missing"] == 0 and s["present"] == s["acked"], detail
    assert s["duplicate_leaves"] == 0, detail
    assert s["duplicate_facts"] == 0 and s["leaves_with_two_facts"] == 0, detail
    assert s["sessions_abstracted"] == s["sessions_ended"] > 0, detail
    assert s["facts"] == s["facts_expected"] == s["facts_by_sessionwork"], detail
    for name in ("web", "worker", "redis", "postgres"):
        f = s["faults"][name]
        assert f["writes_recovered_s"] is not None and f["healthz_green_s"] is not None, (name, detail)
    # While Redis was down writes were served (the rate limit fails open); while Postgres was down
    # they were refused with a retryable 503, never a 500.
    assert s["faults"]["redis"]["errors_in_window"] == 0, detail
    assert set(s["faults"]["postgres"]["error_kinds"]) <= {"503", "ConnectError", "ReadTimeout"}, detail
    assert s["supervisor_restarts"] >= 2, detail
    assert s["write_then_resonate_coherent"] and s["healthy_at_end"], detail
    assert proc.returncode == 0, detail
