"""Django's PostgreSQL backend with a circuit breaker in front of the connection pool
(``ENGINE: "nylon_project.postgresql"``, set by ``nylon_project.embedded``)."""
