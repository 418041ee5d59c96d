"""Memory tension: how strongly a node still pulls on retrieval.

tension = t0 * exp(-lam * max(0, now - last_updated)) * F(mentions),
F(m) = 1 + 0.1 * min(m, 10). Decay only lowers ranking and, below
TENSION_THRESHOLD, stops a node from seeding; it never deletes.
"""

from __future__ import annotations

import numpy as np

from .types import TENSION_THRESHOLD

__all__ = ["tension", "frequency_boost", "seed_until", "sanitize_tension_params", "TENSION_THRESHOLD"]

_MENTION_CAP = 10
_MENTION_GAIN = 0.1

# Range of the stored tension parameters. Rows can carry anything a float column holds (an
# import, a hand edit): NaN/inf would turn tension into NaN/inf and break ranking. Non-finite
# values fall back to the model defaults (memory.models.Node), finite ones are clipped.
DEFAULT_T0 = 1.0
DEFAULT_LAM = 0.01
MAX_T0 = 1e6
MAX_LAM = 1e6


def sanitize_tension_params(
    t0: np.ndarray | float, lam: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray]:
    """t0 in [0, MAX_T0], lam in [0, MAX_LAM]; non-finite -> DEFAULT_T0 / DEFAULT_LAM."""
    t0 = np.asarray(t0, dtype=np.float64)
    lam = np.asarray(lam, dtype=np.float64)
    t0 = np.clip(np.where(np.isfinite(t0), t0, DEFAULT_T0), 0.0, MAX_T0)
    lam = np.clip(np.where(np.isfinite(lam), lam, DEFAULT_LAM), 0.0, MAX_LAM)
    return t0, lam


def frequency_boost(mentions: np.ndarray | int) -> np.ndarray:
    m = np.minimum(np.asarray(mentions, dtype=np.float64), _MENTION_CAP)
    return 1.0 + _MENTION_GAIN * np.maximum(m, 0.0)


def tension(
    t0: np.ndarray | float,
    lam: np.ndarray | float,
    last_updated_days: np.ndarray | float,
    mentions: np.ndarray | int,
    now_days: float,
) -> np.ndarray:
    """Vectorised tension; future timestamps (clock skew) count as age 0."""
    age = np.maximum(0.0, now_days - np.asarray(last_updated_days, dtype=np.float64))
    return (
        np.asarray(t0, dtype=np.float64)
        * np.exp(-np.asarray(lam, dtype=np.float64) * age)
        * frequency_boost(mentions)
    )


def seed_until(
    t0: np.ndarray | float,
    lam: np.ndarray | float,
    last_updated_days: np.ndarray | float,
    mentions: np.ndarray | int,
    threshold: float = TENSION_THRESHOLD,
) -> np.ndarray:
    """Last day on which tension is still >= threshold (inf if it never decays).

    Precomputing this per node turns the per-query "tension >= threshold"
    test into a single comparison instead of an exp over every node.
    """
    t0 = np.asarray(t0, dtype=np.float64)
    lam = np.asarray(lam, dtype=np.float64)
    peak = t0 * frequency_boost(mentions)
    last = np.asarray(last_updated_days, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        horizon = np.log(peak / threshold) / lam
    out = np.where(
        peak < threshold,
        -np.inf,
        np.where(lam > 0, last + horizon, np.inf),
    )
    return np.asarray(out, dtype=np.float64)
