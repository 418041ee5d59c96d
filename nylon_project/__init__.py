from __future__ import annotations

import os

# One BLAS thread per process: the engine's small matrix-vector products get slower, not faster,
# when OpenBLAS spreads them over cores already busy with web and worker processes (measured: the
# exact vector search went from ~7.5 ms to ~0.05 ms on a loaded 2-core box). Set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .celery import app as celery_app  # noqa: E402

__all__ = ("celery_app",)
