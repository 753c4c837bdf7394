"""Fixtures of the storage tests: the real PostgreSQL cluster (tests/pg.py)."""

from pg import pg_url  # noqa: F401  (a fixture)
