"""Evaluation cost of the alert rules, per rule and server, on a SQLite file holding a day of one
server's data at the demo's rates (samples every 5 s for 12 series, a canary every 30 s, 2,000
probe requests, 200 events), scaled to N servers. Not a test: prints a table.

    python -m bench.alerts [--servers 4] [--passes 5]

Each figure is the median wall time of one rule over all servers divided by the server count
(ms per rule and server), beside the whole pass.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from runner.alerts.engine import AlertConfig, AlertEvaluator
from runner.alerts.rules import build_rules
from storage import repo
from storage import series_keys as sk
from storage.db import make_engine

SERIES = (sk.LOG_QUEUE_REQ, sk.LOG_TOKEN_USAGE, sk.LOG_CACHE_HIT_RATE, sk.LOG_RUNNING_REQ, sk.API_HEALTH_OK,
          "gpu.temp_c", "gpu.mem_used_bytes", sk.LOG_GEN_THROUGHPUT_TOK_S, sk.CANARY_OK, sk.CANARY_TTFT_S,
          sk.CANARY_E2E_S, sk.SELF_CPU_PCT)


def seed(engine, sid: int, now: float) -> None:  # type: ignore[no-untyped-def]
    day = 86400
    rows = []
    for t in range(0, day, 5):
        for m in SERIES:
            if m.startswith("canary.") and t % 30:
                continue
            rows.append({"ts": now - day + t, "server_id": sid, "source": "bench", "metric": m,
                         "value": 1.0 if m.endswith("ok") else 0.5})
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=rows)
        run = repo.insert_probe_run(conn, server_id=sid, url="http://x", api="generate", created_at=now)
        repo.insert_probe_requests(conn, rows=[{"run_id": run, "level": 1, "seq": i, "start_ts": now - 3600 + i,
                                                "ok": True, "ttft_s": 0.2, "e2e_s": 1.0} for i in range(2000)])
        repo.insert_events(conn, rows=[{"ts": now - 300 * i, "server_id": sid, "launch_id": None,
                                        "kind": "decode_retract", "message": "r", "raw": None}
                                       for i in range(200)])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--servers", type=int, default=4)
    ap.add_argument("--passes", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'bench.db'}")
        now = time.time()
        for i in range(args.servers):
            server = repo.upsert_server(engine, name=f"s{i}", base_url="http://127.0.0.1:1")
            seed(engine, int(server.id or 0), now)
        targets = {"success_rate": 0.99, "ttft_p99_s": 1.0, "image_p99_s": 30.0}
        ev = AlertEvaluator(engine, build_rules([]), config=AlertConfig(), slo_targets=lambda _n: targets)
        per_rule: dict[str, list[float]] = {}
        totals = []
        for _ in range(args.passes):
            t0 = time.perf_counter()
            report = ev.evaluate(now)
            totals.append((time.perf_counter() - t0) * 1000)
            for name, r in report.items():
                per_rule.setdefault(name, []).append(r["ms"])
    print(f"{args.servers} servers, a day of data each, {args.passes} passes (median)\n")
    print("| rule | ms per server |\n|---|---|")
    for name, ms in per_rule.items():
        print(f"| {name} | {statistics.median(ms) / args.servers:.2f} |")
    print(f"| whole pass (all rules, all servers, writes included) | {statistics.median(totals):.1f} ms |")


if __name__ == "__main__":
    main()
