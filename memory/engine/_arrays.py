"""Growable numpy column with amortised doubling.

Appends happen on every write while reads (``view``) happen on every query, so
the column hands out zero-copy views of its filled prefix.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["GrowArray", "isin_few", "sorted_unique"]


class GrowArray:
    __slots__ = ("_data", "_n", "_fill")

    def __init__(self, dtype: Any, capacity: int = 16, fill: Any = 0) -> None:
        self._fill = fill
        self._data = np.full(max(int(capacity), 1), fill, dtype=dtype)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def view(self) -> np.ndarray:
        """Filled prefix; a view, so in-place edits write through."""
        return self._data[: self._n]

    @property
    def nbytes(self) -> int:
        return int(self._data.nbytes)

    def reserve(self, capacity: int) -> None:
        if capacity <= self._data.shape[0]:
            return
        new_cap = max(capacity, 2 * self._data.shape[0])
        data = np.full(new_cap, self._fill, dtype=self._data.dtype)
        data[: self._n] = self._data[: self._n]
        self._data = data

    def resize(self, n: int) -> None:
        """Set the logical length; new slots hold the fill value."""
        if n > self._n:
            self.reserve(n)
            self._data[self._n : n] = self._fill
        self._n = n

    def append(self, value: Any) -> int:
        pos = self._n
        self.reserve(pos + 1)
        self._data[pos] = value
        self._n = pos + 1
        return pos

    def extend(self, values: Any) -> None:
        values = np.asarray(values, dtype=self._data.dtype)
        m = values.shape[0]
        self.reserve(self._n + m)
        self._data[self._n : self._n + m] = values
        self._n += m


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` (1-d): the distinct values ascending, by a sort. numpy 2's hash-based
    ``unique`` is 3-4x slower on the few hundred ids a query deduplicates at a time."""
    s = np.sort(np.asarray(values).reshape(-1))
    if s.size < 2:
        return s
    first = np.empty(s.size, dtype=bool)
    first[0] = True
    np.not_equal(s[1:], s[:-1], out=first[1:])
    return s[first]


# Up to this many values, ``isin_few`` compares the column with each in turn.
_FEW = 16


def isin_few(column: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``np.isin(column, values)`` for a long column and a few values (an actor's owner key, its
    teams): one comparison pass per value. numpy's ``isin`` picks its table method for integers,
    two reductions over the column and a table, 9x slower with one value and 9x with two on a
    100k-row column (87 and 253 us against 10 and 28); a mask of every query pays it."""
    values = np.asarray(values).reshape(-1)
    if values.size > _FEW:
        return np.isin(column, values)
    out = np.zeros(column.shape, dtype=bool)
    for v in values.tolist():
        out |= column == v
    return out
