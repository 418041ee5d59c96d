"""Nylon retrieval engine: pure Python + numpy, no Django.

Public API (everything else is internal):
  tokenize(text)                      -> list[str]
  BM25Index, VectorIndex, Graph       building blocks
  tension(...), TENSION_THRESHOLD     decay model
  TenantIndex                         per-org in-memory index
  resonate(index, ...)                -> ResonateResult
"""

from __future__ import annotations

from .bm25 import BM25Index, BM25Query
from .graph import Graph
from .index import TenantIndex
from .resonance import Activation, diffuse, fuse_seeds, resonate
from .tension import frequency_boost, seed_until, tension
from .tokenize import STOP_WORDS, tokenize
from .types import (
    MAX_K,
    TENSION_THRESHOLD,
    EdgeKind,
    Explanation,
    Hit,
    NodeKind,
    NodeRecord,
    ResonateParams,
    ResonateResult,
    Scope,
    Seed,
)
from .vectors import VectorIndex

__all__ = [
    "Activation",
    "BM25Index",
    "BM25Query",
    "EdgeKind",
    "Explanation",
    "Graph",
    "Hit",
    "MAX_K",
    "NodeKind",
    "NodeRecord",
    "ResonateParams",
    "ResonateResult",
    "STOP_WORDS",
    "Scope",
    "Seed",
    "TENSION_THRESHOLD",
    "TenantIndex",
    "VectorIndex",
    "diffuse",
    "frequency_boost",
    "fuse_seeds",
    "resonate",
    "seed_until",
    "tension",
    "tokenize",
]
