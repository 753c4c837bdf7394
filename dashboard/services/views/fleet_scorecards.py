"""Fleet-wide scorecards: the fleet rows (views/fleet.py) grouped per model or per profile.

One row per group (`fleet_scorecards(rows, by="model" | "profile")`), with these keys:

| key | what |
|---|---|
| servers | servers in the group |
| output_tok_s, rps | Σ of the servers' output tokens/s and requests/s (each server's scorecard figure; servers without one add nothing) |
| ttft_p50_s … e2e_p99_s | exact percentiles of the POOLED probe requests (measured, successful, at each server's headline level: the level its own row's latency is from) of the window's probe runs of the group's servers — never an average of percentiles, never concurrency 1 mixed with 64 |
| requests | pooled probe requests those percentiles come from |
| usd_per_mtok | Σ (GPU-hour price × GPUs) ÷ Σ output tok/s × 1e6 / 3600, over the servers with a price and a throughput (`priced` of them) |
| errors, ooms, restarts | Σ of the servers' error_count, oom_count and crash_count + restart_count |
| slo_met | share of graded servers whose overall grade is pass (warn and fail do not meet); `graded` of them |

Workloads are never mixed: latency is pooled only across probe runs with the same workload
fingerprint. A group whose servers ran different fingerprints gets its group row without
latency (`note` says why) and one row per fingerprint below it (`fingerprint` set), each
pooling only the requests of that workload, as Compare refuses to compare different workloads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from dashboard.services.views.fleet import NONE_LABEL, FleetRow
from scorecard import math as sm
from scorecard import metric_specs as mk
from scorecard.metric_specs import FLEET_LATENCY_KEYS

GROUP_BYS = ("model", "profile")
MIXED_NOTE = "servers ran {n} different workloads: latency is pooled per fingerprint (rows below)"
NO_PROBE_NOTE = "no probe run in the window: no pooled latency (each server's canary is on its card)"


def _sum(values: Sequence[float | None]) -> float | None:
    have = [v for v in values if v is not None]
    return float(sum(have)) if have else None


def pooled_latency(frames: Sequence[pd.DataFrame]) -> dict[str, float | None]:
    """Exact p50/p95/p99 of TTFT and e2e over every request row of `frames` pooled together,
    and the pooled request count."""
    rows = pd.concat([f for f in frames if f is not None and len(f)], ignore_index=True) if any(
        f is not None and len(f) for f in frames) else pd.DataFrame(columns=["ttft_s", "e2e_s"])
    out: dict[str, float | None] = {"requests": float(len(rows))}
    for name in ("ttft", "e2e"):
        pct = sm.percentiles(pd.to_numeric(rows[f"{name}_s"], errors="coerce").dropna().to_numpy(dtype=float))
        out.update({f"{name}_p{p}_s": v for p, v in pct.items()})
    return out


def _cost(rows: Sequence[FleetRow]) -> tuple[float | None, int]:
    priced = [r for r in rows if r.usd_per_hour is not None and r.figures.get(mk.OUTPUT_TOK_S)]
    if not priced:
        return None, 0
    usd_h = sum(float(r.usd_per_hour or 0.0) for r in priced)
    tok_s = sum(float(r.figures.get(mk.OUTPUT_TOK_S) or 0.0) for r in priced)
    return usd_h / (tok_s * 3600.0) * 1e6, len(priced)


def _group_row(by: str, group: str, rows: Sequence[FleetRow]) -> dict[str, Any]:
    cost, priced = _cost(rows)
    graded = [r for r in rows if r.grade != "none"]
    stab: Callable[[str], float | None] = lambda k: _sum([r.stability.get(k) for r in rows])  # noqa: E731
    crash, restart = stab(mk.CRASH_COUNT), stab(mk.RESTART_COUNT)
    return {
        "group_by": by, "group": group, "fingerprint": None, "servers": len(rows),
        mk.OUTPUT_TOK_S: _sum([r.figures.get(mk.OUTPUT_TOK_S) for r in rows]),
        mk.RPS: _sum([r.figures.get(mk.RPS) for r in rows]),
        **dict.fromkeys(FLEET_LATENCY_KEYS), "requests": None,
        mk.FLEET_USD_PER_MTOK: cost, "priced": priced,
        "errors": stab(mk.ERROR_COUNT), "ooms": stab(mk.OOM_COUNT),
        "restarts": None if crash is None and restart is None else (crash or 0.0) + (restart or 0.0),
        "slo_met": (sum(1 for r in graded if r.grade == "pass") / len(graded)) if graded else None,
        "graded": len(graded), "note": "",
    }


def group_key(row: FleetRow, by: str) -> str:
    if by not in GROUP_BYS:
        raise ValueError(f"group by {by!r} is not one of {', '.join(GROUP_BYS)}")
    return getattr(row, by) or NONE_LABEL


def fleet_scorecards(rows: Sequence[FleetRow], by: str = "model") -> list[dict[str, Any]]:
    """One dict per group (keys in the module docstring), groups in name order; a group of mixed
    workloads is followed by its per-fingerprint rows."""
    groups: dict[str, list[FleetRow]] = {}
    for r in rows:
        groups.setdefault(group_key(r, by), []).append(r)
    out: list[dict[str, Any]] = []
    for name in sorted(groups):
        members = groups[name]
        head = _group_row(by, name, members)
        probed: dict[str, list[FleetRow]] = {}
        for r in members:
            if r.fingerprint and r.requests is not None and len(r.requests):
                probed.setdefault(r.fingerprint, []).append(r)
        out.append(head)
        if not probed:
            head["note"] = NO_PROBE_NOTE
        elif len(probed) == 1:
            fp, runs = next(iter(probed.items()))
            head.update(pooled_latency([r.requests for r in runs if r.requests is not None]))
            head["fingerprint"] = fp
            head["note"] = f"latency pooled over {len(runs)} of {len(members)} servers (one workload)"
        else:
            head["note"] = MIXED_NOTE.format(n=len(probed))
            for fp in sorted(probed):
                sub = _group_row(by, name, probed[fp])
                sub.update(pooled_latency([r.requests for r in probed[fp] if r.requests is not None]))
                sub["fingerprint"] = fp
                sub["note"] = f"workload {fp}: {len(probed[fp])} servers"
                out.append(sub)
    return out

