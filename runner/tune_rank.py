"""Ranking of tune candidates: goodput against the SLO, cost at that level, stability.

Pure functions over plain dicts (a candidate as the tune's state stores it; its report levels
read as collectors/probe/report_model.py Levels), so the runner's tune job, the CLI and the
dashboard rank the same way and a test can feed recorded figures.

- **Goodput** (collectors/probe/stats.py `goodput`; the idea of bench_serving's `--goodput`): the highest load level of the
  candidate's sweep at which every latency target holds: p99 TTFT (`ttft_p99_s`), p99 ITL
  (`itl_p99_s`) and, for image servers, per-image p99 (`image_p99_s`), with the success rate at
  least its target. `goodput_rps` is the measured requests/s at that level. A candidate that
  meets no level is `slo_missed`, ranked after every `ok` one, with the reason.
- **Cost at that level**: USD per 1M output tokens (LLM) or per image, from the GPU price per
  hour and the throughput measured at the goodput level; None when no price is configured.
- **Stability**: errors, OOMs, decode retractions, crashes and queue spikes during the run; a
  candidate with any is ranked after the clean ones it ties with.
- **A trace workload** (`pitwall tune --trace`): a candidate's goodput is its capacity, the
  highest speed-up of the trace it serves within the SLO (collectors/trace/capacity.py: grow,
  bisect to its resolution, three repeats), in requests/s (the knee times the trace's own rate);
  its spread runs from the repeats' lowest knee to the highest speed that failed next to one (a
  search knows a knee only to its resolution). A candidate that meets the SLO at no speed tried
  is `slo_missed`; one whose search ended where the client fell behind the trace's schedule
  (`client_bound`) before any speed met is `failed`, not measured: a busy client is not a slow
  server. With a speed met first, its capacity is at least that (`capped`).
- **Ties** (collectors/probe/stats.py, the one tie rule): goodput is a tie with the best of
  its group when the two goodput levels' measured rps spreads (`spread.rps` of the sweep report
  level: [lo, hi] over 3 repeats) overlap, or, where a spread was not measured (an old report,
  fewer than 9 requests at the level), when they differ by less than spread.UNKNOWN_REL. Inside a
  tie the order is stability, then cost, then p99 TTFT at the goodput level, for display only:
  **a tie at the top is not a winner** (`verdict`): nothing is crowned or applied, and the
  sentence says which candidates tie, their goodput and the spread they fall inside.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from collectors.probe import stats as spread_rule
from collectors.probe.report_model import Level
from collectors.probe.stats import goodput, level_p99, level_value

STABILITY_KEYS = ("error_count", "oom_count", "retraction_count", "crash_count", "queue_above_threshold_s")


def cost_at(level: Level, usd_per_hour: float | None, *, image: bool) -> float | None:
    """USD per 1M output tokens (LLM) or per image at `level`; None without a price or output."""
    tp = level.throughput
    if usd_per_hour is None:
        return None
    if image:
        per_min = tp.images_per_min
        return usd_per_hour / (float(per_min) * 60.0) if per_min else None
    tok_s = tp.output_tok_s
    return usd_per_hour / (float(tok_s) * 3600.0) * 1e6 if tok_s else None


def stability_issues(stability: dict[str, Any]) -> float:
    """Count of stability events in a candidate's scorecard stability block (0 when clean)."""
    total = 0.0
    for key in STABILITY_KEYS:
        v = stability.get(key)
        if isinstance(v, (int, float)) and not math.isnan(float(v)):
            total += float(v)
    return total


def rank(candidates: list[dict[str, Any]], slo: dict[str, float], *, image: bool = False) -> str | None:
    """Fill `status`, `reason`, `rank`, `goodput_rps` and `cost` of scored candidates in place.

    A candidate dict has `profile`, `status` ("failed" stays failed), `levels` (the report
    levels of its sweep) and `scorecard` ({latency, throughput, cost, stability} blocks).
    Returns the winner's profile name: None when no candidate meets the SLO, or when the best
    goodput is a tie (`verdict`).
    """
    ok: list[dict[str, Any]] = []
    missed: list[dict[str, Any]] = []
    for c in candidates:
        if c.get("status") == "failed":
            c["goodput_rps"] = None
            continue
        if c.get("capacity") is not None:
            met = _rank_capacity(c, image=image)
            if c["status"] != "failed":  # not measured: ranked with the failed below
                (ok if met else missed).append(c)
            continue
        best, why = goodput([Level.of(lv) for lv in c.get("levels") or []], slo, image=image)
        if best is None:
            c.update(status="slo_missed", reason=why, goodput_rps=None)
            missed.append(c)
            continue
        usd_h = (c.get("scorecard") or {}).get("cost", {}).get("gpu_usd_per_hour")
        rps = best.throughput.rps
        got = best.spread.of("rps") if best.spread is not None else None
        c.update(status="ok", goodput_rps=float(rps) if rps is not None else 0.0,
                 goodput_spread=[float(v) for v in got] if isinstance(got, list) and len(got) == 2 else None,
                 goodput_level=level_value(best), cost_at_goodput=cost_at(best, usd_h, image=image),
                 p99_at_goodput=level_p99(best, "image" if image else "ttft_s"))
        ok.append(c)
    ordered = _order_ok(ok)
    n = 0
    for c in ordered + missed:
        n += 1
        c["rank"] = n
    for c in candidates:
        if c.get("status") == "failed":
            n += 1
            c["rank"] = n
    return verdict(candidates).winner


def _rank_capacity(c: dict[str, Any], *, image: bool) -> bool:
    """Fill a trace candidate's goodput from its capacity; False when no speed met the SLO (its
    status `failed` when the client gave out before any did)."""
    cap = c["capacity"]
    knee, rate = cap.get("knee"), float(cap.get("rate_rps") or 0.0)
    bound = cap.get("client_bound")
    if knee is None and bound is not None:  # a client that fell behind says nothing of the candidate
        c.update(status="failed", goodput_rps=None,
                 reason=f"not measured: the client fell behind trace {cap.get('trace')}'s schedule twice at "
                        f"{bound:.3g}x before any speed met the SLO (a late replay says nothing of the server); "
                        "run the tune from a less busy host")
        return False
    if knee is None:
        worst = (cap.get("steps") or [{}])[-1]
        c.update(status="slo_missed", goodput_rps=None,
                 reason=f"meets the SLO at no speed of trace {cap.get('trace')} tried (down to {worst.get('speed', 0):.3g}x: "
                        f"{'; '.join(worst.get('why') or [])})")
        return False
    high = float(cap["high"])  # the speed that failed next to a knee (capped: the knee itself)
    levels = [Level.of(lv) for lv in c.get("levels") or []]
    at = levels[0] if levels else None
    usd_h = (c.get("scorecard") or {}).get("cost", {}).get("gpu_usd_per_hour")
    c.update(status="ok", goodput_rps=float(knee) * rate, goodput_spread=[float(cap["low"]) * rate, high * rate],
             goodput_level=float(knee), cost_at_goodput=cost_at(at, usd_h, image=image) if at is not None else None,
             p99_at_goodput=level_p99(at, "image" if image else "ttft_s") if at is not None else None)
    return True


def _what(c: dict[str, Any]) -> str:
    """A ranked candidate's goodput in words: at which sweep level, or which speed-up of the trace."""
    cap = c.get("capacity")
    if cap is None:
        return f"goodput {c['goodput_rps']:.2f} req/s at level {c['goodput_level']:g}"
    held = f"at least {cap['knee']:.3g}x" if cap.get("capped") else f"{cap['knee']:.3g}x ({cap['low']:.3g}-{cap['high']:.3g}x)"
    stop = f", the client's limit at {cap['client_bound']:.3g}x" if cap.get("client_bound") is not None else ""
    return f"holds {held} of trace {cap['trace']}{stop}: {c['goodput_rps']:.2f} req/s"


def _open_above(c: dict[str, Any]) -> bool:
    """A capacity known only from below: the client gave out before the server did."""
    cap = c.get("capacity") or {}
    return bool(cap.get("capped")) and cap.get("client_bound") is not None


def _tied(lead: dict[str, Any], c: dict[str, Any]) -> bool:
    if _open_above(c):  # it may hold as much as the lead: nothing measured says otherwise
        return True
    return spread_rule.is_tie(lead["goodput_rps"], c["goodput_rps"], lead.get("goodput_spread"),
                              c.get("goodput_spread"))


def _order_ok(ok: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Goodput groups (ties with the group's best: `_tied`), each ordered by stability, cost, p99 latency."""
    by_goodput = sorted(ok, key=lambda c: -c["goodput_rps"])
    groups: list[list[dict[str, Any]]] = []
    for c in by_goodput:
        if groups and _tied(groups[-1][0], c):
            groups[-1].append(c)
        else:
            groups.append([c])
    out: list[dict[str, Any]] = []
    for group in groups:
        group.sort(key=lambda c: (
            stability_issues((c.get("scorecard") or {}).get("stability") or {}),
            c["cost_at_goodput"] if c["cost_at_goodput"] is not None else math.inf,
            c["p99_at_goodput"] if c["p99_at_goodput"] is not None else math.inf,
        ))
        names = [c["profile"] for c in group]
        for c in group:
            base = _what(c)
            if len(group) > 1:
                others = ", ".join(n for n in names if n != c["profile"])
                base += (f"; a tie with {others} ({_noise(group)}), "
                         "listed by stability, cost, then p99 latency")
            c["reason"] = base
        out.extend(group)
    return out


def _noise(group: list[dict[str, Any]]) -> str:
    """Why a group is a tie, in words: the measured spread it falls inside, or the floor."""
    spreads = [c.get("goodput_spread") for c in group]
    if any(s is None for s in spreads):
        return f"spread not measured: under {spread_rule.UNKNOWN_REL * 100:g} %"
    lo = min(min(s) for s in spreads if s)
    hi = max(max(s) for s in spreads if s)
    open_above = [str(c["profile"]) for c in group if _open_above(c)]
    if open_above:
        return (f"{', '.join(open_above)} measured only up to where the client fell behind: "
                f"at least {lo:.2f} req/s, the top not known")
    return f"inside the measured spread {lo:.2f}–{hi:.2f} req/s"


@dataclass(frozen=True)
class Verdict:
    """What a tune concludes: `winner` (None for a tie or when nothing met the SLO), `tied`
    (the profiles tied at the top, best goodput first; empty when there is no tie) and `text`,
    one sentence that says what was compared and what to do."""

    winner: str | None
    tied: tuple[str, ...]
    text: str


def verdict(candidates: list[dict[str, Any]]) -> Verdict:
    """The verdict of ranked candidates (their `status`, `goodput_rps`, `goodput_spread`): the
    best goodput wins only when no other candidate's goodput is a tie with it."""
    ok = sorted((c for c in candidates if c.get("status") == "ok" and c.get("goodput_rps") is not None),
                key=lambda c: (-float(c["goodput_rps"]), c.get("rank") or 0))
    if not ok:
        return Verdict(None, (), "No candidate met the SLO at any load level; keep the current profile.")
    lead = ok[0]
    tied = [lead] + [c for c in ok[1:] if _tied(lead, c)]
    if len(tied) == 1:
        nxt = ok[1] if len(ok) > 1 else None
        vs = (f" vs {nxt['profile']} {nxt['goodput_rps']:.2f} req/s, outside the measured spread"
              if nxt is not None else "")
        if nxt is not None and (lead.get("goodput_spread") is None or nxt.get("goodput_spread") is None):
            vs = (f" vs {nxt['profile']} {nxt['goodput_rps']:.2f} req/s (spread not measured: "
                  f"more than {spread_rule.UNKNOWN_REL * 100:g} % apart)")
        won = _what(lead) if lead.get("capacity") is not None else f"goodput {lead['goodput_rps']:.2f} req/s"
        return Verdict(lead["profile"], (), f"{lead['profile']} wins: {won}{vs}.")
    names = [str(c["profile"]) for c in tied]
    who = ", ".join(names[:-1]) + f" and {names[-1]}"
    figures = " vs ".join(f"{c['goodput_rps']:.2f}" for c in tied)
    more = ("a longer window of the trace" if lead.get("capacity") is not None
            else "more requests per level")
    narrow = ("tune again from a less busy host, where the client keeps to the trace's schedule"
              if any(_open_above(c) for c in tied) else f"tune again with {more} to narrow the spread")
    return Verdict(None, tuple(names), f"{who} tie: goodput {figures} req/s, {_noise(tied)}; "
                   f"keep the current profile (no winner to apply), or {narrow}.")


def state_verdict(state: dict[str, Any]) -> Verdict | None:
    """The verdict of a tune's stored state (Intent.result); None before the candidates are ranked.
    Recomputed from the ranked candidates when the state has no `verdict` (a tune recorded before
    ties were measured is judged by the same rule, with the floor where no spread was kept)."""
    if state.get("verdict"):
        return Verdict(state.get("winner"), tuple(state.get("tie") or ()), str(state["verdict"]))
    cands = state.get("candidates") or []
    if not any(c.get("status") in ("ok", "slo_missed") for c in cands):
        return None
    return verdict(cands)


CANDIDATE_KEYS = ("profile", "status", "reason", "rank", "goodput_rps", "goodput_spread", "scorecard", "launch_id",
                  "probe_run_ids", "capacity")


def public_json(state: dict[str, Any]) -> dict[str, Any]:
    """The `pitwall tune --json` contract from a tune's stored state (Intent.result):
    {server, workload (the fingerprint), slo, candidates: [{profile, status ok|failed|slo_missed,
    reason, rank, goodput_rps, goodput_spread ([lo, hi] req/s or None), scorecard {latency,
    throughput, cost, stability}, launch_id, probe_run_ids, capacity (a trace workload's: {trace,
    knee, low, high, knees, capped, client_bound, rate_rps, steps}; else None)}], winner (None for a tie), tie (the
    profiles tied at the top, [] if none), verdict (the sentence), restored_profile}; candidates
    in rank order."""
    cands = sorted(state.get("candidates") or [], key=lambda c: c.get("rank") or 10**6)
    v = state_verdict(state)
    return {
        "server": state.get("server"),
        "workload": state.get("workload"),
        "slo": state.get("slo") or {},
        "candidates": [{k: c.get(k) for k in CANDIDATE_KEYS} for c in cands],
        "winner": v.winner if v is not None else None,
        "tie": list(v.tied) if v is not None else [],
        "verdict": v.text if v is not None else None,
        "restored_profile": state.get("restored_profile"),
    }
