"""The client self-check of a sweep, said once per run (Benchmarks, `pitwall probe`).

Each level's `self_check` (collectors/probe/report.py `self_check`: the rule and its reasons)
carries loop_lag_p99_s against lag_bound_s (max(2 ms, 5 % of the level's p50 TTFT or E2E)),
client_cpu_pct against cpu_max_pct, and its reasons; the bounds (LAG_FLOOR_S, LAG_SHARE_MAX,
CLIENT_CPU_MAX_PCT) live here, so this module imports nothing of the report. Here they become:

- `run_note(levels)`: one sentence for the whole run naming the untrusted levels and the
  measured figure against its bound, instead of the reason repeated on every level;
- `level_mark(self_check)`: a short table cell, "yes" / "no: lag" / "no: CPU" / "no: pacing";
- `run_mark(trusted, levels)`: a runs-table cell, "yes" / "no (c=4, c=8)".
"""

from __future__ import annotations

from typing import Any

#: the self-check's bounds (report.py `self_check` applies them; its docstring says why)
LAG_FLOOR_S = 0.002  # above an idle client's wake-up jitter (p99 1.1-1.4 ms)
LAG_SHARE_MAX = 0.05  # loop lag p99 at most 5 % of the level's p50 TTFT / E2E
CLIENT_CPU_MAX_PCT = 70.0


def level_label(lv: dict[str, Any]) -> str:
    if "concurrency" in lv:
        return f"c={lv['concurrency']}"
    return f"r={float(lv.get('rate') or 0):g}/s"


def _causes(sc: dict[str, Any]) -> list[str]:
    """Short names of why a level's self-check failed: lag, CPU, pacing (from its reasons)."""
    out = []
    for reason in sc.get("reasons") or []:
        name = "lag" if "loop lag" in reason else "CPU" if "CPU" in reason else "pacing"
        if name not in out:
            out.append(name)
    return out


def level_mark(sc: dict[str, Any]) -> str:
    """A table cell: "yes", "no: lag", "no: CPU", "no: lag, CPU" or "—" (not checked)."""
    if sc.get("trusted") is None:
        return "—"
    return "yes" if sc["trusted"] else "no: " + (", ".join(_causes(sc)) or "see note")


def run_mark(trusted: bool | None, levels: list[dict[str, Any]]) -> str:
    """A runs-table cell: "yes", "no (c=4, c=8)" naming the untrusted levels, or "—"."""
    if trusted is None:
        return "—"
    bad = [level_label(lv) for lv in levels if (lv.get("self_check") or {}).get("trusted") is False]
    return "yes" if trusted and not bad else "no (" + (", ".join(bad) or "see run") + ")"


def _ms(v: float) -> str:
    return f"{v * 1000:,.1f} ms"


def run_note(levels: list[dict[str, Any]]) -> str | None:
    """One plain-words note for a run's levels on why some are not trusted (None when all are):
    which levels, the loop lag each measured against its bound, the client's CPU when that was
    the cause, starts behind schedule (open loop)."""
    bad = [lv for lv in levels if (lv.get("self_check") or {}).get("trusted") is False]
    if not bad:
        return None
    parts: list[str] = []
    lagged = [lv for lv in bad if "lag" in _causes(lv["self_check"])]
    if lagged:
        figs = []
        for lv in lagged:
            sc = lv["self_check"]
            lag, bound = sc.get("loop_lag_p99_s"), sc.get("lag_bound_s")
            if lag is not None and bound is not None:
                basis = (f" ({LAG_SHARE_MAX:.0%} of its {sc['lag_basis']}, at least "
                         f"{LAG_FLOOR_S * 1000:g} ms)" if sc.get("lag_basis") else "")
                figs.append(f"{level_label(lv)}: {_ms(lag)} against a bound of {_ms(bound)}{basis}")
            elif lag is not None:
                figs.append(f"{level_label(lv)}: {_ms(lag)}")
        parts.append("the probe client's event loop ran late (lag p99 " + "; ".join(figs) +
                     "), so each latency it timed there can be late by about that much")
    busy = [lv for lv in bad if "CPU" in _causes(lv["self_check"])]
    if busy:
        cpu = max(float(lv["self_check"].get("client_cpu_pct") or 0) for lv in busy)
        parts.append(f"the probe client used up to {cpu:.0f} % of one core (over "
                     f"{float(busy[0]['self_check'].get('cpu_max_pct') or CLIENT_CPU_MAX_PCT):g} %), so it was "
                     "overloaded and queued its own work")
    paced = [lv for lv in bad if "pacing" in _causes(lv["self_check"])]
    if paced:
        parts.append("requests started behind their schedule at " +
                     ", ".join(level_label(lv) for lv in paced) + ", so the rate asked was not met")
    names = ", ".join(level_label(lv) for lv in bad)
    which = "every level" if len(bad) == len(levels) else f"{len(bad)} of {len(levels)} levels ({names})"
    text = "; ".join(parts)
    return (f"Not trusted: {which}. " + text[:1].upper() + text[1:] +
            ". Read their figures as upper bounds, or run those levels again on a quieter client.")
