"""Descending order with near-ties broken by id: shared by every ranking of float scores, so
the engine ranks the same on every CPU and as its float64 reference does."""

from __future__ import annotations

import numpy as np

__all__ = ["COSINE_TIE_ABS", "RANK_TIE_EPS", "kth_largest", "rank_order"]

# Values closer than this (relative) rank as ties. Cosines come from float32
# vectors and window means are summed in member order, so two mathematically equal values can
# differ in the 7th digit; ordering them by that noise instead of by id made the ranking depend on
# the CPU's summation order (an AVX-512 host ranked a tie differently from the reference).
RANK_TIE_EPS = 1e-6
# Cosines also tie within this absolute gap: a float32 dot product of unit vectors carries ~1e-7 of
# absolute error whatever its value, so near zero (where cancellation leaves few exact digits) a
# relative test ordered two equal window means by noise (a property test found one, ~1e-4 apart
# relative, that the float64 reference ranked the other way).
COSINE_TIE_ABS = 1e-6


def rank_order(values: np.ndarray, tie: np.ndarray, eps: float = RANK_TIE_EPS, abs_eps: float = 0.0) -> np.ndarray:
    """Indices by descending value; a run of values each within ``eps`` (relative) or ``abs_eps``
    (absolute) of the previous one is a tie group, ordered by ``tie`` ascending. NaN counts as -inf
    (last). A run may chain past ``eps`` in total; that needs values packed at 1e-6 spacing, which
    real scores are not, and chaining (unlike a fixed grid) never splits two equal-but-noisy values
    apart."""
    v = np.where(np.isnan(values), -np.inf, np.asarray(values, dtype=np.float64))
    order = np.lexsort((tie, -v))
    if v.size < 2:
        return order
    sv = v[order]
    fin = np.isfinite(sv)
    with np.errstate(invalid="ignore"):  # -inf - -inf: NaN, which is "not a new group"
        gap = sv[:-1] - sv[1:]
    # Relative to the larger of the two (scores of decayed memories are far below 1 and still
    # distinct); the -inf (NaN) tail is a group of its own, never part of a finite value's group.
    a, b = np.where(fin[:-1], sv[:-1], 0.0), np.where(fin[1:], sv[1:], 0.0)
    new = (gap > np.maximum(eps * np.maximum(np.abs(a), np.abs(b)), abs_eps)) | (fin[:-1] != fin[1:])
    if new.all():  # no two values tie: the first order stands (and a second sort would keep it)
        return order
    group = np.concatenate(([0], np.cumsum(new)))
    return order[np.lexsort((np.asarray(tie)[order], group))]


# Below this many values per wanted one, kth_largest partitions them all.
_SAMPLE_MIN_RATIO = 32


def kth_largest(values: np.ndarray, k: int) -> float:
    """The k-th largest of ``values`` (1 <= k <= values.size), as ``values[argpartition(-values,
    k - 1)[:k]].min()`` gives it, without partitioning every value: a top-k cut over the tens of
    thousands of documents a frequent query term touches wants 10-20 of them.

    A strided sample's 4th largest is a threshold that roughly ``values.size / 2k`` values reach;
    when at least ``k`` do, the k-th largest is among them (it is at least the threshold), so only
    they are partitioned. Otherwise (an adversarial order, NaN) every value is, as before."""
    n = values.size
    if n >= _SAMPLE_MIN_RATIO * k:
        stride = n // (8 * k)
        sample = values[::stride]
        t = np.partition(sample, sample.size - 4)[sample.size - 4]
        above = values[values >= t]
        if above.size >= k:
            return above[np.argpartition(-above, k - 1)[:k]].min()
    return values[np.argpartition(-values, k - 1)[:k]].min()
