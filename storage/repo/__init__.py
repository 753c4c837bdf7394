"""Keyword-only read/write functions: the only SQL in Pitwall, one module per table family.

Callers use `from storage import repo` and `repo.<function>`; the families are
`samples` (hot-path insert, raw reads, chart buckets), `rollups` (minute and quarter tiers),
`events`, `fleet` (every server at once, one query per kind of row), `intents`, `runner_state` (collector state, the runner lease), `inventory` (servers,
profiles, launches), `probes` (probe runs and requests), `retention` (what old rows leave, in batches), `windows` (a window read raw where samples are
kept and from rollups where retention removed them), `audit` and `alerts` (alert episodes,
silences, the notification outbox).

Rules (measured on SQLite: ORM adds 19k rows/s, Core executemany 233k): time-series rows are written with SQLAlchemy Core
`insert()` executemany in batches, never per-row ORM adds (12x slower); percentile reads select the
value column over an indexed window and compute with numpy, never ORDER BY/OFFSET; charts read
SQL-bucketed series (`CAST(ts / bucket AS INTEGER)`), long windows read Rollup and RollupQuarter.
Everything here is portable SQL (SQLite and PostgreSQL).
"""

from __future__ import annotations

from storage.repo._common import QUARTER_S
from storage.repo.alerts import *  # noqa: F403
from storage.repo.audit import *  # noqa: F403
from storage.repo.events import *  # noqa: F403
from storage.repo.fleet import *  # noqa: F403
from storage.repo.intents import *  # noqa: F403
from storage.repo.inventory import *  # noqa: F403
from storage.repo.probes import *  # noqa: F403
from storage.repo.retention import *  # noqa: F403
from storage.repo.rollups import *  # noqa: F403
from storage.repo.runner_state import *  # noqa: F403
from storage.repo.samples import *  # noqa: F403
from storage.repo.windows import *  # noqa: F403

__all__ = ["QUARTER_S"]
