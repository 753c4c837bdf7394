"""Benchmark: thirty days of one server, compressed: database size per day before and after
retention, runner memory over time (slope), runner CPU, and the 7-day view at day 30.

Run: ``.venv/bin/python bench/soak.py [--days 30] [--hz 0.05] [--scale-retention F] [--paint] [--keep DIR]``

What runs: the runner's own write path and housekeeping, in this process, on a simulated clock
that ends at the real now (so the dashboard's 7-day view at the end sees the data as recent):
- one server, 31 series (11 server series and 5 series for each of 4 GPUs: the same set as
  bench/dashboard_paint.py), one sample per series every 1/hz seconds. At --hz 1 that is the
  demo's real rate (2.68M rows a day); the default --hz 0.05 is a twentieth of it, so 30 days
  run in about five minutes on 2 cores. Bytes per day scale with the rate: the table reports both;
- each simulated hour: the samples go through the runner's BatchWriter (SampleRow -> flush ->
  one executemany), then `Runner._roll_up()` (minute and quarter rollups, catch-up slices);
- each simulated day: the retention policy of the settings' defaults (raw 7 days, minutes 90
  days, quarters 2 years) through `repo.apply_retention`, then SQLite's incremental vacuum;
- measured at each day's end: the database file with its WAL (bytes) before and after retention,
  this process's RSS; over the run: CPU seconds / wall seconds. RSS slope: least squares over
  days 8-30 (after the raw window fills), MB per day.
- per table (sample, rollup, rollup_quarter) at each day's end: bytes (dbstat), and at the end
  bytes per simulated day each tier holds, and the default policy's steady state projected from
  them (raw scaled to 1 Hz; rollups do not depend on the rate). `--scale-retention F` multiplies
  every horizon by F so the whole life cycle (raw window, minute horizon, quarter horizon) fits in
  the run, and the table gives the DB size and its slope once every horizon is reached;
- at the end: the Server page's 7-day read (read_series) in ms, and with --paint the 7-day view's
  first paint in headless Chromium (bench/dashboard_paint.py's method).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from dashboard_paint import GPUS_PER_SERVER, _series_defs, _wave  # noqa: E402

from collectors.base import SampleRow  # noqa: E402
from runner import loop as runner_loop  # noqa: E402
from runner.loop import Runner  # noqa: E402
from runner.writer import Batch  # noqa: E402
from storage import repo  # noqa: E402
from storage.db import database_size_bytes, incremental_vacuum, make_engine  # noqa: E402

DAY = 86400.0
POLICY = {"samples_days": 7.0, "rollups_days": 90.0, "quarters_days": 730.0, "probes_days": 365.0,
          "events_days": 365.0}


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


TABLES = ("sample", "rollup", "rollup_quarter")


def scaled(policy: dict[str, float], factor: float) -> dict[str, float]:
    """The policy with every horizon multiplied by `factor` (--scale-retention)."""
    return {k: v * factor for k, v in policy.items()}


def soak(db: Path, *, days: int, hz: float, policy: dict[str, float] = POLICY) -> dict[str, object]:
    url = f"sqlite:///{db}"
    engine = make_engine(url)
    end = time.time() // 3600 * 3600
    start = end - days * DAY
    srv = repo.upsert_server(engine, name="srv-a", base_url="http://127.0.0.1:30000",
                             gpu_indices=list(range(GPUS_PER_SERVER)), gpu_hourly_usd=3.8)
    assert srv.id is not None
    repo.create_launch(engine, server_id=srv.id, profile_name="soak", engine_version="0.5.23", status="ready",
                       started_at=start, server_args={"tp_size": GPUS_PER_SERVER})
    with engine.begin() as conn:  # a few events, so the Server view has rules to mark (and toggle)
        repo.insert_events(conn, rows=[
            {"ts": start + (k + 0.5) * DAY, "server_id": srv.id, "launch_id": None,
             "kind": ("oom", "decode_retract", "relaunch_done")[k % 3],
             "message": f"soak event #{k}", "raw": None} for k in range(days)])
    defs = _series_defs(srv.id, 0)
    rng = np.random.default_rng(11)
    clock = Clock(start)
    real_time = runner_loop.time.time
    runner_loop.time.time = clock  # the runner's rollup clock follows the simulation
    runner = Runner(engine, [])
    proc = psutil.Process()
    cpu0, wall0 = sum(proc.cpu_times()[:2]), time.perf_counter()
    step = 1.0 / hz
    per_day: list[dict[str, float]] = []
    rows_total = 0
    try:
        for h in range(days * 24):
            t0 = start + h * 3600
            ts = np.arange(t0, t0 + 3600, step)
            samples = []
            for metric, base, amp, noise in defs:
                vals = _wave(ts, base, amp, noise, rng)
                src = metric.split(".")[0]
                samples.extend(SampleRow(float(t), srv.id, metric, float(v), src) for t, v in zip(ts, vals, strict=True))
            runner.writer.put(Batch(samples=samples))
            rows_total += runner.flush()
            clock.now = t0 + 3600 + runner_loop.ROLLUP_LAG_S
            runner._roll_up()
            if (h + 1) % 24 == 0:
                before = database_size_bytes(url) or 0
                repo.apply_retention(engine, policy=policy, now=clock.now, batch_rows=20_000, max_batches=10_000)
                incremental_vacuum(engine, pages_per_step=10_000, max_steps=10_000)
                after = database_size_bytes(url) or 0
                sizes = repo.table_sizes(engine, list(TABLES))
                per_day.append({"day": (h + 1) / 24, "before_mb": before / 1e6, "after_mb": after / 1e6,
                                "rss_mb": proc.memory_info().rss / 1e6,
                                **{f"{t}_mb": (sizes.get(t) or 0) / 1e6 for t in TABLES}})
                d = per_day[-1]
                print(f"day {d['day']:>4.0f}: {d['before_mb']:8.1f} MB before retention, {d['after_mb']:8.1f} MB "
                      f"after (sample {d['sample_mb']:.1f}, rollup {d['rollup_mb']:.1f}, quarter "
                      f"{d['rollup_quarter_mb']:.2f}), RSS {d['rss_mb']:6.1f} MB", flush=True)
    finally:
        runner_loop.time.time = real_time
    cpu = sum(proc.cpu_times()[:2]) - cpu0
    wall = time.perf_counter() - wall0
    tail = [d for d in per_day if d["day"] >= 8]
    slope = float(np.polyfit([d["day"] for d in tail], [d["rss_mb"] for d in tail], 1)[0]) if len(tail) >= 2 else float("nan")
    engine.dispose()
    return {"per_day": per_day, "rows": rows_total, "cpu_s": cpu, "wall_s": wall, "rss_slope_mb_day": slope,
            "end": end}


def report_tiers(per_day: list[dict[str, float]], policy: dict[str, float], hz: float) -> None:
    """Bytes per table per simulated day (each tier's bytes at the end over the days it holds),
    the size once every horizon is reached, and the steady state of the default policy
    projected from those per-day bytes (raw scaled to the real 1 Hz)."""
    end = per_day[-1]
    days = end["day"]
    held = {"sample": min(days, policy["samples_days"]), "rollup": min(days, policy["rollups_days"]),
            "rollup_quarter": min(days, policy["quarters_days"])}
    per = {t: end[f"{t}_mb"] / held[t] for t in TABLES if held[t] > 0}
    for t in TABLES:
        print(f"| {t}: MB per simulated day held (at day {days:.0f}, {held[t]:g} days held) | {per[t]:.3f} MB |")
    horizon = max(policy["samples_days"], policy["rollups_days"], policy["quarters_days"])
    flat = [d for d in per_day if d["day"] >= horizon + 1]
    if len(flat) >= 2:
        sizes = [d["after_mb"] for d in flat]
        slope = float(np.polyfit([d["day"] for d in flat], sizes, 1)[0])
        print(f"| DB after every horizon ({horizon:g} d): days {flat[0]['day']:.0f}-{days:.0f} | "
              f"{min(sizes):.1f}-{max(sizes):.1f} MB, slope {slope:+.3f} MB/day |")
    steady = (POLICY["samples_days"] * per["sample"] / hz + POLICY["rollups_days"] * per["rollup"]
              + POLICY["quarters_days"] * per["rollup_quarter"])
    print(f"| steady state of the default policy (raw 7 d at 1 Hz + minutes 90 d + quarters 2 y), "
          f"projected | {steady:,.0f} MB ({POLICY['samples_days'] * per['sample'] / hz:,.0f} + "
          f"{POLICY['rollups_days'] * per['rollup']:,.0f} + {POLICY['quarters_days'] * per['rollup_quarter']:,.0f}) |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--hz", type=float, default=0.05, help="samples per second per series (1 = the demo's real rate)")
    ap.add_argument("--paint", action="store_true", help="also measure the 7-day view's first paint in Chromium")
    ap.add_argument("--keep", type=Path, default=None, help="keep the database in this folder")
    ap.add_argument("--scale-retention", type=float, default=1.0, metavar="F",
                    help="multiply every retention horizon by F (e.g. 0.02: raw 3.4 h, minutes 1.8 d, "
                         "quarters 14.6 d), so the whole life cycle fits in --days")
    args = ap.parse_args()
    policy = scaled(POLICY, args.scale_retention)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="pitwall-soak-"))
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "soak.db"
    for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        p.unlink(missing_ok=True)
    try:
        res = soak(db, days=args.days, hz=args.hz, policy=policy)
        per_day = res["per_day"]
        assert isinstance(per_day, list)
        rows_per_day = float(res["rows"]) / args.days  # type: ignore[arg-type]
        print()
        print(f"rows written: {res['rows']:,} ({rows_per_day:,.0f} a day at {args.hz:g} Hz x 31 series; "
              f"x{1 / args.hz:g} at the real 1 Hz)")
        after = [d["after_mb"] for d in per_day]
        grow = [b - a for a, b in zip(after, after[1:], strict=False)]
        early = [g for d, g in zip(per_day[1:], grow, strict=False) if d["day"] <= 7]
        late = [g for d, g in zip(per_day[1:], grow, strict=False) if d["day"] > 8]
        print("| figure | value |\n|---|---|")
        if early:
            print(f"| DB growth a day, days 2-7 (raw window filling) | {np.mean(early):.1f} MB |")
        if late:
            print(f"| DB growth a day, days 9-{args.days} (after the raw window) | {np.mean(late):.2f} MB |")
        print(f"| DB at day {args.days}, after retention | {after[-1]:.1f} MB |")
        if early:
            print(f"| DB at day {args.days} without retention (days 2-7 growth x {args.days}) | "
                  f"{np.mean(early) * args.days:.0f} MB, projected |")
        report_tiers(per_day, policy, args.hz)
        print(f"| RSS at the end | {per_day[-1]['rss_mb']:.0f} MB |")
        print(f"| RSS slope, days 8-{args.days} | {res['rss_slope_mb_day']:+.2f} MB/day |")
        print(f"| runner work: CPU s / wall s | {res['cpu_s']:.0f} / {res['wall_s']:.0f} s "
              f"({100 * float(res['cpu_s']) / float(res['wall_s']):.0f} % of a core) |")  # type: ignore[arg-type]
        from dashboard_paint import server_side

        server_side(db, float(res["end"]))  # type: ignore[arg-type]
        if args.paint:
            from dashboard_paint import measure

            env = {"PITWALL_DATABASE_URL": f"sqlite:///{db}", "PITWALL_DATA_DIR": str(folder),
                   "PITWALL_MANAGED_RUNNER": "1", "PITWALL_DEMO": "off", "PITWALL_CONFIG": ""}
            paint = measure(ROOT / "app.py", "/server?server=srv-a&window=7d", env, want=6, runs=3,
                            cold_gap_s=11.0, shot=None, one_chart=("GPU memory used", "GPU utilisation"))
            first = sorted(paint["first_chart_s"])[1]
            print(f"| 7-day view first paint at day {args.days} (median of 3, Chromium) | {first:.2f} s |")
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"(host load average over 1 min at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
