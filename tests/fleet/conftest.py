"""Fixtures of the fleet tests: the real PostgreSQL cluster (tests/pg.py) and a fresh database on
it per test (`fleet_db`), whose schema exists before any runner starts."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy
from pg import pg_url  # noqa: F401  (a fixture)

from storage.db import make_engine


@pytest.fixture
def fleet_db(pg_url: str) -> Iterator[str]:  # noqa: F811
    """A fresh database on the real PostgreSQL cluster, schema created (the runners share it)."""
    name = f"fleet_{uuid.uuid4().hex[:10]}"
    admin = sqlalchemy.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sqlalchemy.text(f"CREATE DATABASE {name}"))
    admin.dispose()
    url = pg_url.replace("/postgres?", f"/{name}?")
    make_engine(url).dispose()
    yield url
