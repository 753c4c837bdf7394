"""The fleet reads on the suite's real PostgreSQL: same rows as on SQLite, and a query count
that does not grow from 10 to 50 servers."""

from __future__ import annotations

import pytest
from fleet_seed import count_queries, seed_fleet

pytestmark = pytest.mark.integration  # the real PostgreSQL cluster (tests/pg.py)


def test_fleet_rows_on_postgres_match_sqlite_with_a_fixed_querycount_queries(pg_url, tmp_path):
    from dashboard.services.views.fleet import fleet_rows
    from dashboard.services.views.fleet_scorecards import fleet_scorecards
    from storage.db import make_engine

    pg = make_engine(pg_url)
    now = seed_fleet(pg, 10)
    q10, rows10 = count_queries(pg, lambda: fleet_rows(pg, now=now))
    seed_fleet(pg, 50, now=now, start=10)
    q50, rows = count_queries(pg, lambda: fleet_rows(pg, now=now))
    assert len(rows10) == 10 and len(rows) == 50
    assert q10 == q50, (q10, q50)

    lite = make_engine(f"sqlite:///{tmp_path / 'pitwall.db'}")
    seed_fleet(lite, 50, now=now)
    ref = fleet_rows(lite, now=now)
    for a, b in zip(rows, ref, strict=True):
        assert a.as_dict().keys() == b.as_dict().keys()
        for k, v in b.as_dict().items():
            if isinstance(v, float):
                assert a.as_dict()[k] == pytest.approx(v), (b.name, k)
            else:
                assert a.as_dict()[k] == v, (b.name, k)
    pooled = {c["group"]: c["ttft_p99_s"] for c in fleet_scorecards(rows) if c["ttft_p99_s"] is not None}
    assert pooled == pytest.approx({c["group"]: c["ttft_p99_s"] for c in fleet_scorecards(ref)
                                    if c["ttft_p99_s"] is not None})
    pg.dispose()
    lite.dispose()
