"""The bulk path's binary COPY registers pgvector's adapters on its cursor. pgvector's own
register_vector_info makes two classes per call that psycopg keeps for good, so every bulk chunk
of a worker leaked them; the registration must make them once."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from django.db import connection
from pgvector.psycopg.vector import VectorDumper

from memory import services

pytestmark = pytest.mark.django_db


def _dumper_classes() -> int:
    gc.collect()
    return len(VectorDumper.__subclasses__())


def test_bulk_copies_of_vectors_make_their_adapter_classes_once():
    with connection.cursor() as cur:
        cur.execute("CREATE TEMP TABLE copy_probe (id bigint, embedding vector(3))")
        services._copy(cur, "copy_probe", ("id", "embedding"), [(0, np.array([1, 0, 0], dtype=np.float32))])
        before = _dumper_classes()
        for i in range(1, 21):
            services._copy(cur, "copy_probe", ("id", "embedding"), [(i, np.array([0, 1, i], dtype=np.float32))])
        assert _dumper_classes() == before  # was two more per copy
        cur.execute("SELECT count(*), max(embedding[3]) FROM (SELECT id, embedding::real[] AS embedding "
                    "FROM copy_probe) v")
        assert cur.fetchone() == (21, 20.0)
