"""Sample ingest: Pitwall's write path vs raw sqlite3 executemany, side by side in one run.

Both write the same N rows (ts, server_id, launch_id, source, metric, value) into a fresh WAL
database with the (server_id, metric, ts) index, in batches of BATCH rows per commit. Pitwall's
path is the one the runner uses: SampleRow objects -> Runner.flush -> repo.insert_samples (SQLAlchemy
Core executemany). Raw is sqlite3.executemany with the same pragmas and index. Rounds alternate
(raw, pitwall, raw, pitwall, ...) and the median of each is reported, with the ratio.

Run: .venv/bin/python bench/storage.py [--rows 1000000] [--batch 1000] [--rounds 3]
Target: pitwall / raw >= 0.6.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from storage import series_keys as sk

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collectors.base import SampleRow  # noqa: E402
from runner.loop import Runner  # noqa: E402
from runner.writer import Batch  # noqa: E402
from storage.db import make_engine  # noqa: E402

METRICS = (sk.LOG_RUNNING_REQ, sk.LOG_QUEUE_REQ, sk.LOG_TOKEN_USAGE, "gpu.0.power_w", sk.CANARY_TTFT_S)


def raw(path: Path, rows: int, batch: int) -> float:
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.execute(
        "CREATE TABLE sample (id INTEGER PRIMARY KEY, ts REAL, server_id INTEGER, launch_id INTEGER,"
        " source TEXT, metric TEXT, value REAL)"
    )
    con.execute("CREATE INDEX ix ON sample (server_id, metric, ts)")
    con.commit()
    t0 = time.perf_counter()
    base = 1.8e9
    for start in range(0, rows, batch):
        data = [
            (base + i, 1, None, "log", METRICS[i % 5], float(i)) for i in range(start, min(start + batch, rows))
        ]
        con.executemany(
            "INSERT INTO sample (ts, server_id, launch_id, source, metric, value) VALUES (?,?,?,?,?,?)", data
        )
        con.commit()
    dt = time.perf_counter() - t0
    con.close()
    return rows / dt


def pitwall(path: Path, rows: int, batch: int) -> float:
    engine = make_engine(f"sqlite:///{path}")
    runner = Runner(engine, [])
    t0 = time.perf_counter()
    base = 1.8e9
    for start in range(0, rows, batch):
        samples = [
            SampleRow(base + i, 1, METRICS[i % 5], float(i), "log") for i in range(start, min(start + batch, rows))
        ]
        runner.writer.put(Batch(samples=samples))
        runner.flush()
    dt = time.perf_counter() - t0
    engine.dispose()
    return rows / dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    r_raw, r_pw = [], []
    with tempfile.TemporaryDirectory() as d:
        for i in range(args.rounds):
            r_raw.append(raw(Path(d) / f"raw{i}.db", args.rows, args.batch))
            r_pw.append(pitwall(Path(d) / f"pw{i}.db", args.rows, args.batch))
    m_raw, m_pw = statistics.median(r_raw), statistics.median(r_pw)
    print(f"rows={args.rows:,} batch={args.batch:,} rounds={args.rounds} (median)")
    print(f"| path | rows/s |\n|---|---|\n| raw sqlite3 executemany | {m_raw:,.0f} |\n| pitwall (Runner.flush -> repo.insert_sample_tuples) | {m_pw:,.0f} |")
    print(f"ratio pitwall/raw = {m_pw / m_raw:.2f} (target >= 0.6)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
