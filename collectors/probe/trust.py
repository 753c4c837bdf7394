"""The client self-check of a sweep, said once per run (Benchmarks, `pitwall probe`).

Each level's `self_check` (collectors/probe/report.py `self_check`: the rule and its reasons)
carries loop_lag_p99_s against lag_bound_s (max(2 ms, 5 % of the level's p50 TTFT or E2E)),
client_cpu_pct against cpu_max_pct, and its reasons; the bounds (LAG_FLOOR_S, LAG_SHARE_MAX,
CLIENT_CPU_MAX_PCT) live here, so this module reads the report's typed values
(collectors/probe/report_model.py) and imports nothing of report.py. Here they become:

- `run_note(levels)`: one sentence for the whole run naming the untrusted levels and the
  measured figure against its bound, instead of the reason repeated on every level;
- `level_mark(self_check)`: a short table cell, "yes" / "no: lag" / "no: CPU" / "no: pacing";
- `run_mark(trusted, levels)`: a runs-table cell, "yes" / "no (c=4, c=8)".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from collectors.probe.report_model import Level, SelfCheck

#: the self-check's bounds (report.py `self_check` applies them; its docstring says why)
LAG_FLOOR_S = 0.002  # above an idle client's wake-up jitter (p99 1.1-1.4 ms)
LAG_SHARE_MAX = 0.05  # loop lag p99 at most 5 % of the level's p50 TTFT / E2E
CLIENT_CPU_MAX_PCT = 70.0


def level_label(lv: Level | dict[str, Any]) -> str:
    lv = Level.of(lv)
    if not lv.is_rate:
        return f"c={lv.concurrency}"
    return f"r={float(lv.rate or 0):g}/s"


def _causes(sc: SelfCheck) -> list[str]:
    """Short names of why a level's self-check failed: lag, CPU, pacing (from its reasons)."""
    out = []
    for reason in sc.reasons or []:
        name = "lag" if "loop lag" in reason else "CPU" if "CPU" in reason else "pacing"
        if name not in out:
            out.append(name)
    return out


def level_mark(sc: SelfCheck | dict[str, Any] | None) -> str:
    """A table cell: "yes", "no: lag", "no: CPU", "no: lag, CPU" or "—" (not checked)."""
    if isinstance(sc, dict):
        sc = SelfCheck.from_dict(sc)
    if sc is None or sc.trusted is None:
        return "—"
    return "yes" if sc.trusted else "no: " + (", ".join(_causes(sc)) or "see note")


def _untrusted(levels: Sequence[Level | dict[str, Any]]) -> list[Level]:
    return [lv for lv in map(Level.of, levels) if lv.trusted is False]


def run_mark(trusted: bool | None, levels: Sequence[Level | dict[str, Any]]) -> str:
    """A runs-table cell: "yes", "no (c=4, c=8)" naming the untrusted levels, or "—"."""
    if trusted is None:
        return "—"
    bad = [level_label(lv) for lv in _untrusted(levels)]
    return "yes" if trusted and not bad else "no (" + (", ".join(bad) or "see run") + ")"


def _ms(v: float) -> str:
    return f"{v * 1000:,.1f} ms"


def run_note(levels: Sequence[Level | dict[str, Any]]) -> str | None:
    """One plain-words note for a run's levels on why some are not trusted (None when all are):
    which levels, the loop lag each measured against its bound, the client's CPU when that was
    the cause, starts behind schedule (open loop)."""
    bad = _untrusted(levels)
    if not bad:
        return None
    checks = [(lv, lv.self_check) for lv in bad if lv.self_check is not None]
    parts: list[str] = []
    lagged = [(lv, sc) for lv, sc in checks if "lag" in _causes(sc)]
    if lagged:
        figs = []
        for lv, sc in lagged:
            lag, bound = sc.loop_lag_p99_s, sc.lag_bound_s
            if lag is not None and bound is not None:
                basis = (f" ({LAG_SHARE_MAX:.0%} of its {sc.lag_basis}, at least "
                         f"{LAG_FLOOR_S * 1000:g} ms)" if sc.lag_basis else "")
                figs.append(f"{level_label(lv)}: {_ms(lag)} against a bound of {_ms(bound)}{basis}")
            elif lag is not None:
                figs.append(f"{level_label(lv)}: {_ms(lag)}")
        parts.append("the probe client's event loop ran late (lag p99 " + "; ".join(figs) +
                     "), so each latency it timed there can be late by about that much")
    busy = [sc for _, sc in checks if "CPU" in _causes(sc)]
    if busy:
        cpu = max(float(sc.client_cpu_pct or 0) for sc in busy)
        parts.append(f"the probe client used up to {cpu:.0f} % of one core (over "
                     f"{float(busy[0].cpu_max_pct or CLIENT_CPU_MAX_PCT):g} %), so it was "
                     "overloaded and queued its own work")
    paced = [lv for lv, sc in checks if "pacing" in _causes(sc)]
    if paced:
        parts.append("requests started behind their schedule at " +
                     ", ".join(level_label(lv) for lv in paced) + ", so the rate asked was not met")
    names = ", ".join(level_label(lv) for lv in bad)
    which = "every level" if len(bad) == len(levels) else f"{len(bad)} of {len(levels)} levels ({names})"
    text = "; ".join(parts)
    return (f"Not trusted: {which}. " + text[:1].upper() + text[1:] +
            ". Read their figures as upper bounds, or run those levels again on a quieter client.")
