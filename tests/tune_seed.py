"""Tune candidates from real sweep report levels: records built here, the level report computed
by collectors/probe/report.py (its `spread` block included), ranked by runner/tune_rank.py.

A level is a closed loop at concurrency 1, `n` requests back to back. The three repeats of the
level (spread.slices: thirds in start order) run at (1 - jitter), 1, (1 + jitter) times the
nominal request time (0.1 ms of client turnaround between requests), so the measured rps spread is about [rps / (1 + jitter), rps / (1 - jitter)].
"""

from __future__ import annotations

from typing import Any

from collectors.probe.client import RequestRecord
from collectors.probe.pacing import LevelPlan, LevelResult
from collectors.probe.report import level_report


def report_level(rps: float, *, jitter: float = 0.04, n: int = 30, ttft_s: float = 0.03,
                 level: int = 4) -> dict[str, Any]:
    """One sweep report level measuring about `rps` req/s with a spread of about ±`jitter`."""
    records, t = [], 0.0
    for seq in range(n):
        factor = (1 - jitter, 1.0, 1 + jitter)[min(3 * seq // n, 2)]
        d = factor / rps
        records.append(RequestRecord(level=level, seq=seq, t_start=t, t_end=t + d, ttft_s=ttft_s, e2e_s=d,
                                     itl_s=[0.005] * 8, tokens_out=9, tpot_s=0.005, ok=True))
        t += d + 1e-4  # the client's turnaround: a start never coincides with the end before it
    res = LevelResult(LevelPlan("concurrency", level, requests=n, warmup=0), records=records,
                      loop_lag_s=[0.0005], cpu_pct=5.0, wall_s=t)
    return level_report(res).to_dict()


def candidate(profile: str, levels: list[dict[str, Any]], *, usd_h: float | None = 4.0,
              errors: int = 0) -> dict[str, Any]:
    """A scored candidate as runner/tunes.py records it, before ranking."""
    return {"profile": profile, "status": "scored", "reason": "", "rank": None, "goodput_rps": None,
            "launch_id": None, "probe_run_ids": [], "levels": levels,
            "scorecard": {"cost": {"gpu_usd_per_hour": usd_h}, "stability": {"error_count": errors},
                          "latency": {"ttft_p99_s": 0.03}, "throughput": {}}}
