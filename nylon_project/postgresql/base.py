"""Django's psycopg backend, asking the circuit breaker (``breaker.guard``) before the pool."""

from __future__ import annotations

from django.db.backends.postgresql import base

from nylon_project.postgresql.breaker import guard


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params):
        # Raised here, a DatabaseUnreachable goes through Django's error wrapping like a pool timeout.
        if self.pool is not None:
            guard(self.pool)
        return super().get_new_connection(conn_params)
