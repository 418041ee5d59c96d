"""Measured memory of an object graph, to hold the engine's own byte accounting (``nbytes``)
against: the cache's byte cap is only as honest as that estimate."""

from __future__ import annotations

import gc
import sys
import types
from array import array

import numpy as np
from usearch.index import Index

__all__ = ["measured_nbytes"]

_SKIP = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
         types.CodeType, types.FrameType)


def measured_nbytes(root: object) -> tuple[int, int]:
    """(total, buffers) of everything reachable from ``root``.

    ``total``: every reachable object once: Python objects by ``sys.getsizeof`` (which includes
    the data of numpy arrays owning it and of ``array.array``), plus what usearch reports for its
    native HNSW graph. ``buffers``: the raw data buffers alone (numpy, ``array.array``, usearch).
    Classes, modules and functions are not followed. Slow (a walk of every object): for tests
    and benchmarks, never on a request.
    """
    seen: set[int] = set()
    stack = [root]
    total = buffers = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _SKIP):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, np.ndarray):
            if obj.base is None:
                buffers += obj.nbytes
            else:
                stack.append(obj.base)  # a view: its data is counted at the owner
            continue
        if isinstance(obj, array):
            buffers += obj.buffer_info()[1] * obj.itemsize
            continue
        if isinstance(obj, Index):
            native = int(obj.memory_usage)
            total += native
            buffers += native
            continue
        stack.extend(gc.get_referents(obj))
    return total, buffers
