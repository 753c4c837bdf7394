"""Ranking of tune candidates (issue 19): goodput against the SLO, cost at that level, stability.

Pure functions over plain dicts, so the runner's tune job, the CLI and the dashboard rank the
same way and a test can feed recorded figures.

- **Goodput** (the idea of `--goodput` in SGLang's bench_serving): the highest load level of the
  candidate's sweep at which every latency target holds: p99 TTFT (`ttft_p99_s`), p99 ITL
  (`itl_p99_s`) and, for image servers, per-image p99 (`image_p99_s`), with the success rate at
  least its target. `goodput_rps` is the measured requests/s at that level. A candidate that
  meets no level is `slo_missed`, ranked after every `ok` one, with the reason.
- **Cost at that level**: USD per 1M output tokens (LLM) or per image, from the GPU price per
  hour and the throughput measured at the goodput level; None when no price is configured.
- **Stability**: errors, OOMs, decode retractions, crashes and queue spikes during the run; a
  candidate with any is ranked after the clean ones it ties with.
- **Ties**: goodput within TIE_REL of the group's best is a tie (measurement noise on a busy
  host); inside a tie the order is stability, then cost, then p99 TTFT at the goodput level, and
  the reason says so.
"""

from __future__ import annotations

import math
from typing import Any

TIE_REL = 0.05  # goodput within 5 % of the best of its group is a tie
LATENCY_TARGETS = (("ttft_p99_s", "ttft_s", "p99 TTFT"), ("itl_p99_s", "itl_s", "p99 ITL"))
STABILITY_KEYS = ("error_count", "oom_count", "retraction_count", "crash_count", "queue_above_threshold_s")


def _p99(level: dict[str, Any], key: str) -> float | None:
    if key == "image":
        block = (level.get("image") or {}).get("per_image_s") or {}
    else:
        block = level.get(key) or {}
    v = block.get("p99")
    return float(v) if isinstance(v, (int, float)) else None


def level_value(level: dict[str, Any]) -> float:
    """The load level of a report level: its concurrency, or its request rate."""
    for key in ("concurrency", "rate"):
        if isinstance(level.get(key), (int, float)):
            return float(level[key])
    return 0.0


def level_misses(level: dict[str, Any], slo: dict[str, float], *, image: bool) -> list[str]:
    """What a level misses of the SLO targets, one phrase each (empty: the level meets them)."""
    misses = []
    checks = [("image_p99_s", "image", "per-image p99")] if image else list(LATENCY_TARGETS)
    for target_key, report_key, label in checks:
        target = slo.get(target_key)
        if target is None:
            continue
        value = _p99(level, report_key)
        if value is None:
            misses.append(f"{label} not measured")
        elif value > target:
            misses.append(f"{label} {value * 1000:.0f} ms > {target * 1000:.0f} ms")
    want_ok = slo.get("success_rate")
    rate = level.get("success_rate")
    if want_ok is not None and (rate is None or float(rate) < want_ok):
        misses.append(f"success rate {float(rate or 0) * 100:.1f} % < {want_ok * 100:.1f} %")
    return misses


def goodput(levels: list[dict[str, Any]], slo: dict[str, float], *, image: bool
            ) -> tuple[dict[str, Any] | None, str]:
    """(the highest level meeting the SLO or None, why none does: the misses of the lowest)."""
    ordered = sorted(levels, key=level_value)
    best = None
    for lv in ordered:
        if not level_misses(lv, slo, image=image):
            best = lv
    if best is not None:
        return best, ""
    if not ordered:
        return None, "no load level was measured"
    low = ordered[0]
    return None, f"no load level meets the SLO (at {level_value(low):g}: {'; '.join(level_misses(low, slo, image=image))})"


def cost_at(level: dict[str, Any], usd_per_hour: float | None, *, image: bool) -> float | None:
    """USD per 1M output tokens (LLM) or per image at `level`; None without a price or output."""
    tp = level.get("throughput") or {}
    if usd_per_hour is None:
        return None
    if image:
        per_min = tp.get("images_per_min")
        return usd_per_hour / (float(per_min) * 60.0) if per_min else None
    tok_s = tp.get("output_tok_s")
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
    Returns the winner's profile name (None when no candidate meets the SLO).
    """
    ok: list[dict[str, Any]] = []
    missed: list[dict[str, Any]] = []
    for c in candidates:
        if c.get("status") == "failed":
            c["goodput_rps"] = None
            continue
        best, why = goodput(c.get("levels") or [], slo, image=image)
        if best is None:
            c.update(status="slo_missed", reason=why, goodput_rps=None)
            missed.append(c)
            continue
        usd_h = (c.get("scorecard") or {}).get("cost", {}).get("gpu_usd_per_hour")
        rps = (best.get("throughput") or {}).get("rps")
        c.update(status="ok", goodput_rps=float(rps) if rps is not None else 0.0,
                 goodput_level=level_value(best), cost_at_goodput=cost_at(best, usd_h, image=image),
                 p99_at_goodput=_p99(best, "image" if image else "ttft_s"))
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
    return ordered[0]["profile"] if ordered else None


def _order_ok(ok: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Goodput groups (ties within TIE_REL), each ordered by stability, cost, p99 latency."""
    by_goodput = sorted(ok, key=lambda c: -c["goodput_rps"])
    groups: list[list[dict[str, Any]]] = []
    for c in by_goodput:
        lead = groups[-1][0]["goodput_rps"] if groups else None
        if lead and c["goodput_rps"] >= lead * (1 - TIE_REL):
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
            base = f"goodput {c['goodput_rps']:.2f} req/s at level {c['goodput_level']:g}"
            if len(group) > 1:
                others = ", ".join(n for n in names if n != c["profile"])
                base += (f"; a tie with {others} (goodput within {TIE_REL * 100:.0f} %), "
                         "ordered by stability, cost, then p99 latency")
            c["reason"] = base
        out.extend(group)
    return out


CANDIDATE_KEYS = ("profile", "status", "reason", "rank", "goodput_rps", "scorecard", "launch_id", "probe_run_ids")


def public_json(state: dict[str, Any]) -> dict[str, Any]:
    """The `pitwall tune --json` contract from a tune's stored state (Intent.result):
    {server, workload (the fingerprint), slo, candidates: [{profile, status ok|failed|slo_missed,
    reason, rank, goodput_rps, scorecard {latency, throughput, cost, stability}, launch_id,
    probe_run_ids}], winner, restored_profile}; candidates in rank order."""
    cands = sorted(state.get("candidates") or [], key=lambda c: c.get("rank") or 10**6)
    return {
        "server": state.get("server"),
        "workload": state.get("workload"),
        "slo": state.get("slo") or {},
        "candidates": [{k: c.get(k) for k in CANDIDATE_KEYS} for c in cands],
        "winner": state.get("winner"),
        "restored_profile": state.get("restored_profile"),
    }
