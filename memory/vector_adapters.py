"""pgvector's psycopg adapters, registered on one cursor (or connection) without leaking classes.

``pgvector.psycopg.register_vector_info`` makes two new dumper classes (``type('', (VectorDumper,),
{'oid': …})``) on every call, and psycopg keeps every dumper or loader class it is ever given in a
class-level dict (``AdaptersMap._optimised``), so those classes are never freed. Called per cursor,
as the engine cache's catch-up did, that leaked two classes (with their ABC and Protocol caches,
~3 KiB of Python heap, and pinned allocator arenas around them) per catch-up, for the life of the
process: web RSS grew with every write and every recall. psycopg makes its own per-type classes
once for the same reason (``psycopg.types.array._make_loader``, psycopg issue #647); this does
the same for pgvector's: one pair of classes per vector OID.
"""

from __future__ import annotations

import threading
from functools import cache

from pgvector import Vector
from pgvector.psycopg.vector import VectorBinaryDumper, VectorBinaryLoader, VectorDumper, VectorLoader
from psycopg.abc import AdaptContext
from psycopg.types import TypeInfo

__all__ = ["register_vector_adapters"]

_lock = threading.Lock()


@cache
def _dumpers(oid: int) -> tuple[type[VectorDumper], type[VectorBinaryDumper]]:
    # The OID goes on the class (as pgvector does) so COPY's set_types finds the dumper by it.
    return (type("VectorTextDumper", (VectorDumper,), {"oid": oid}),
            type("VectorBinaryOidDumper", (VectorBinaryDumper,), {"oid": oid}))


def register_vector_adapters(context: AdaptContext, info: TypeInfo) -> None:
    """What ``register_vector_info(context, info)`` registers (vectors in and out, text and binary,
    ``Vector`` and numpy arrays), with classes made once per vector OID."""
    if info is None:
        raise RuntimeError("the vector type is missing: is the pgvector extension installed?")
    info.register(context)
    with _lock:  # functools.cache may run the factory twice under a race: two classes, once
        text, binary = _dumpers(info.oid)
    adapters = context.adapters
    for cls in (Vector, "numpy.ndarray"):
        adapters.register_dumper(cls, text)
        adapters.register_dumper(cls, binary)
    adapters.register_loader(info.oid, VectorLoader)
    adapters.register_loader(info.oid, VectorBinaryLoader)
