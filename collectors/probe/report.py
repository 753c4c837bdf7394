"""Per-level report of a sweep, computed exactly from the per-request records with numpy.

Percentiles are `numpy.percentile` (linear interpolation) over every measured (non-warm-up)
successful request: TTFT, TPOT and E2E one value per request, ITL pooled over every per-token gap
of those requests. Failed requests count in `errors`, never in the latency figures.

Per level (a `Level` of collectors/probe/report_model.py; the CLI `--json` shape is `public_report()`; the
stored ProbeRun.report is the full report's `to_dict()`):

| key | meaning |
|---|---|
| concurrency / rate | the requested level (workers, or requests/s) |
| requests, ok | measured requests sent / succeeded (warm-up excluded) |
| errors | {error kind: count} |
| ttft_s, itl_s, tpot_s, e2e_s | {p50, p95, p99, mean, max} seconds, None when no data |
| throughput.rps / .output_tok_s | successful requests / their output tokens per second over the steady window (only measured requests in flight -> last measured start; `_steady`), else the whole measured window |
| throughput.images_per_min | images API only |
| image | images API only: `per_image_s` (e2e / images per request), `inference_s` (the server's `inference_time_s`: forward only, no queueing), `inference_s_per_step` (inference_time_s / steps: an upper bound on a denoising step, since it includes encode and decode; None when the steps were left to the server), `peak_memory_bytes` (`peak_memory_mb` × 2^20), each {p50, p95, p99, mean, max}; `steps`, `images_per_request`, `reported` (requests whose answer carried the figures) |
| achieved | concurrency = Σ e2e / window (Little's law); rate = starts / start span; start lag p99 (open loop) |
| success_rate | ok / requests |
| self_check | loop_lag_p99_s, lag_bound_s, lag_basis, client_cpu_pct (% of one core), cpu_max_pct, trusted, reasons |
| spread | {rps, output_tok_s, images_per_min, ttft_p99_s, itl_p99_s, image_p99_s, e2e_p99_s}: each [lo, hi] in the figure's unit, or None (not this API, or fewer than 9 measured requests): the level's measured requests in start order cut into 3 consecutive repeats (collectors/probe/stats.py), the figure on each repeat, widened to the whole level's figure. Throughput per repeat: closed loop by Little's law (in flight × successful requests ÷ the repeat's Σ e2e, in flight = the level's rps × Σ e2e ÷ successes, so each repeat is the level's rps × the level's mean e2e ÷ the repeat's; stats.closed_loop_rps; counting completions in a repeat's short window swung 12–53 req/s at 16 requests); open loop the steady-window definition on the repeat's own window (its first start -> the next repeat's first start), counting every successful request that finished inside it |

Client self-check (`self_check`): a level is `trusted: false` when the client's own delay is a
visible share of what it measured, judged RELATIVE to the level's latency:

- loop lag: the event loop's p99 lag may be at most max(LAG_FLOOR_S, LAG_SHARE_MAX × reference),
  the reference being the level's p50 TTFT (streamed LLM answers) or p50 E2E (image and other
  answers without a first token). Why: a timestamp is taken when the loop gets to it, so each
  latency the client records is late by up to the loop lag; 5 ms is nothing beside a 5-second
  image (0.1 %) and half of a 10 ms TTFT. 5 % keeps that error below the differences a
  comparison acts on. The floor (2 ms) sits above an idle client's own wake-up jitter measured
  on a 2-vCPU VM (raw asyncio p99 1.1-1.4 ms at 100 tok/s), so timer
  noise never counts. ITL (gaps of a few ms) is more sensitive than TTFT: read a level's ITL p99
  with its `loop_lag_p99_s` beside it.
- client CPU above 70 % of one core: the client is overloaded and queues
  its own work, whatever the latency.

The stored self_check carries the figures behind the verdict (`lag_bound_s`, `lag_basis`,
`cpu_max_pct`), so a page can say once per run which levels failed and by how much.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from collectors.probe import stats as probe_stats
from collectors.probe.client import RequestRecord
from collectors.probe.pacing import LevelResult
from collectors.probe.report_model import (
    SPREAD_FIELDS,
    Achieved,
    ImageFigures,
    Level,
    SelfCheck,
    Spread,
    Stats,
    SweepReport,
    Throughput,
)
from collectors.probe.stats import percentile, stats, steady_window
from collectors.probe.trust import CLIENT_CPU_MAX_PCT, LAG_FLOOR_S, LAG_SHARE_MAX, level_mark

START_LAG_P99_MAX_S = 0.010  # open loop: starts later than this behind schedule = rate not met
PUBLIC_STAT_KEYS = ("ttft_s", "itl_s", "tpot_s", "e2e_s")
#: run-level blocks of a workload that has them (structured output, multi-turn, fork)
WORKLOAD_KEYS = ("structured", "turns", "branches", "branch_reuse")


def self_check(loop_lag_s: list[float], cpu_pct: float, reference_s: float | None = None,
               basis: str = "E2E p50") -> SelfCheck:
    """The client's verdict on itself for one level (rule and reasons: the module docstring).
    `reference_s`: the level's p50 latency named by `basis`; None (nothing succeeded) leaves the
    floor as the bound."""
    lag_p99 = percentile(loop_lag_s, 99)
    bound = max(LAG_FLOOR_S, LAG_SHARE_MAX * reference_s) if reference_s else LAG_FLOOR_S
    named = f"{LAG_SHARE_MAX:.0%} of {basis} {reference_s * 1000:,.1f} ms" if reference_s else "floor"
    reasons = []
    if lag_p99 is not None and lag_p99 > bound:
        reasons.append(f"client event-loop lag p99 {lag_p99 * 1000:,.1f} ms > {bound * 1000:,.1f} ms "
                       f"({named}, at least {LAG_FLOOR_S * 1000:g} ms)")
    if cpu_pct > CLIENT_CPU_MAX_PCT:
        reasons.append(f"client CPU {cpu_pct:.0f} % of one core > {CLIENT_CPU_MAX_PCT:g} %: "
                       "the client is overloaded")
    return SelfCheck(loop_lag_p99_s=lag_p99, lag_bound_s=bound, lag_basis=basis if reference_s else None,
                     client_cpu_pct=round(cpu_pct, 1), cpu_max_pct=CLIENT_CPU_MAX_PCT, trusted=not reasons,
                     reasons=reasons)


def reference_latency(ok: list[RequestRecord]) -> tuple[float | None, str]:
    """(seconds, name) the self-check judges loop lag against: p50 TTFT of the successful
    requests when they streamed a first token, else their p50 E2E; (None, ...) when none."""
    ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
    if ttft:
        return percentile(ttft, 50), "TTFT p50"
    return percentile([r.e2e_s for r in ok if r.e2e_s is not None], 50), "E2E p50"


MIB = 1 << 20  # peak_memory_mb is torch's reserved bytes / 2^20


def _stats(values: list[float]) -> Stats:
    d = stats(values)
    return Stats(p50=d["p50"], p95=d["p95"], p99=d["p99"], mean=d["mean"], max=d["max"])


def image_block(ok: list[RequestRecord], *, steps: int | None, images_per_request: int
                ) -> ImageFigures:
    """The per-image figures of one level's successful image requests (see the table above)."""
    n = max(images_per_request, 1)
    infer = [float(v) for r in ok if isinstance(v := (r.detail or {}).get("inference_time_s"),
                                                   int | float)]
    peak = [float(v) * MIB for r in ok
            if isinstance(v := (r.detail or {}).get("peak_memory_mb"), int | float)]
    return ImageFigures(
        per_image_s=_stats([r.e2e_s / n for r in ok if r.e2e_s is not None]),
        inference_s=_stats(infer),
        inference_s_per_step=_stats([v / steps for v in infer] if steps else []),
        peak_memory_bytes=_stats(peak),
        steps=steps,
        images_per_request=n,
        reported=len(infer),
    )


def level_report(result: LevelResult, api: str = "generate", *, image_steps: int | None = None,
                 images_per_request: int = 1) -> Level:
    """The full report of one level (`image_steps` / `images_per_request`: images API only)."""
    plan = result.plan
    measured = [r for r in result.records if not r.warmup]
    ok = [r for r in measured if r.ok]
    errors = Counter(r.error_kind or "unknown" for r in measured if not r.ok)
    window = _window(measured)
    itl = [g for r in ok for g in r.itl_s]
    counted, span = _steady(result, measured, ok, window)
    tokens_out = sum(r.tokens_out or 0 for r in counted)
    images = sum(r.images or 0 for r in counted)
    rps = len(counted) / span if span else None
    tok_s = tokens_out / span if span and api != "images" else None
    # an images level writes images/min even when None; another API has no such key
    throughput = (Throughput.keyed(rps=rps, output_tok_s=tok_s, images_per_min=images / span * 60.0 if span else None)
                  if api == "images" else Throughput(rps=rps, output_tok_s=tok_s))
    closed = plan.mode == "concurrency"
    if closed:
        busy = sum(r.e2e_s or 0.0 for r in measured)
        achieved = Achieved.keyed(concurrency=busy / window if window else None)
    else:
        starts = sorted(r.t_start for r in measured)
        start_span = starts[-1] - starts[0] if len(starts) > 1 else 0.0
        lag = result.start_lag_s[plan.warmup:] or result.start_lag_s
        achieved = Achieved.keyed(rate=(len(starts) - 1) / start_span if start_span > 0 else None,
                                  start_lag_p99_s=percentile(lag, 99))
    check = self_check(result.loop_lag_s, result.cpu_pct, *reference_latency(ok))
    if not closed and (achieved.start_lag_p99_s or 0.0) > START_LAG_P99_MAX_S:
        check.trusted = False
        check.reasons.append(
            f"open-loop starts ran {(achieved.start_lag_p99_s or 0.0) * 1000:.1f} ms (p99) behind schedule"
        )
    level = Level(
        concurrency=int(plan.value) if closed else None,
        rate=None if closed else plan.value,
        requests=len(measured),
        ok=len(ok),
        errors=dict(sorted(errors.items())),
        ttft_s=_stats([r.ttft_s for r in ok if r.ttft_s is not None]),
        itl_s=_stats(itl),
        tpot_s=_stats([r.tpot_s for r in ok if r.tpot_s is not None]),
        e2e_s=_stats([r.e2e_s for r in ok if r.e2e_s is not None]),
        throughput=throughput,
        self_check=check,
        success_rate=len(ok) / len(measured) if measured else None,
        achieved=achieved,
        planned_requests=plan.requests,
        warmup=plan.warmup,
        window_s=window,
        steady_window_s=_steady(result, measured, ok, window)[1],
        stopped=result.stopped,
        image=image_block(ok, steps=image_steps, images_per_request=images_per_request) if api == "images" else None,
    )
    level.spread = spread_block(result, measured, level, api=api, images_per_request=images_per_request)
    return level


def spread_block(result: LevelResult, measured: list[RequestRecord], level: Level, *, api: str,
                 images_per_request: int = 1) -> Spread:
    """The `spread` of a level (see the table above): [lo, hi] | None for each of SPREAD_FIELDS."""
    image = api == "images"
    n_img = max(images_per_request, 1)
    order = sorted(measured, key=lambda r: r.t_start)
    parts = probe_stats.slices(order)
    if not parts:
        return Spread()
    starts, ends = [r.t_start for r in order], [r.t_end for r in order]
    ok, e2e = [r.ok for r in order], [r.e2e_s for r in order]
    # a closed loop's repeats are read by Little's law at the requests in flight the level's own
    # steady-window rps implies (stats.level_in_flight), an open loop's by their own window
    tp = level.throughput
    in_flight = (probe_stats.level_in_flight(tp.rps, e2e, ok, float(result.plan.value))
                 if result.plan.mode == "concurrency" else None)

    def per_repeat(of: Callable[[RequestRecord], float], per: float = 1.0) -> list[float | None]:
        return probe_stats.repeat_throughput(starts, ends, ok, e2e, [of(r) for r in order],
                                             in_flight=in_flight, per=per)

    def p99(values: Callable[[list[RequestRecord]], list[float]]) -> list[float | None]:
        return [probe_stats.percentile(values([r for r in part if r.ok]), 99) for part in parts]

    figures: dict[str, tuple[list[float | None], float | None]] = {
        "rps": (per_repeat(lambda r: 1.0), tp.rps),
        "e2e_p99_s": (p99(lambda ok: [r.e2e_s for r in ok if r.e2e_s is not None]), level.e2e_s.p99),
    }
    if image:
        figures["images_per_min"] = (per_repeat(lambda r: float(r.images or 0), 60.0), tp.images_per_min)
        figures["image_p99_s"] = (p99(lambda ok: [r.e2e_s / n_img for r in ok if r.e2e_s is not None]),
                                  level.image.per_image_s.p99 if level.image is not None else None)
    else:
        figures["output_tok_s"] = (per_repeat(lambda r: float(r.tokens_out or 0)), tp.output_tok_s)
        figures["ttft_p99_s"] = (p99(lambda ok: [r.ttft_s for r in ok if r.ttft_s is not None]), level.ttft_s.p99)
        figures["itl_p99_s"] = (p99(lambda ok: [g for r in ok for g in r.itl_s]), level.itl_s.p99)
    out = Spread()
    for key in SPREAD_FIELDS:
        if key in figures:
            values, whole = figures[key]
            got = probe_stats.widen(probe_stats.from_values(values), whole)
            setattr(out, key, got.as_list() if got is not None else None)
    return out


def _steady(result: LevelResult, measured: list[RequestRecord], ok: list[RequestRecord],
            window: float) -> tuple[list[RequestRecord], float]:
    """steady_window over the level's records: (successful requests counted, seconds)."""
    if not measured:
        return ok, window
    mask, span = steady_window([r.t_start for r in measured], [r.t_end for r in measured],
                               [r.ok for r in measured], [r.t_end for r in result.records if r.warmup],
                               result.plan.mode == "concurrency")
    return [r for r, counted in zip(measured, mask, strict=True) if counted], span


def _window(records: list[RequestRecord]) -> float:
    if not records:
        return 0.0
    return max(r.t_end for r in records) - min(r.t_start for r in records)


def public_report(full: SweepReport | dict[str, Any]) -> dict[str, Any]:
    """Exactly the `pitwall probe --json` shape of the issue, from a full sweep report."""
    report = SweepReport.of(full)
    levels = []
    for lv in report.levels:
        key = "rate" if lv.is_rate else "concurrency"
        sc = lv.self_check or SelfCheck()
        levels.append({
            key: getattr(lv, key), "requests": lv.requests, "ok": lv.ok, "errors": lv.errors,
            **{k: getattr(lv, k).to_dict() for k in PUBLIC_STAT_KEYS},
            "throughput": {"rps": lv.throughput.rps, "output_tok_s": lv.throughput.output_tok_s},
            "self_check": {"loop_lag_p99_s": sc.loop_lag_p99_s,
                           "client_cpu_pct": sc.client_cpu_pct, "trusted": sc.trusted},
            **({"image": lv.image.to_dict() if lv.image is not None else None} if lv.has("image") else {}),
            "spread": lv.spread.to_dict() if lv.spread is not None else None,
        })
    out: dict[str, Any] = {"fingerprint": report.fingerprint, "levels": levels}
    out.update({k: v for k in WORKLOAD_KEYS if (v := getattr(report, k)) is not None})
    return out


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.1f}"


def format_table(full: SweepReport | dict[str, Any]) -> str:
    """A fixed-width text table of a sweep report (milliseconds for latencies)."""
    head = (f"{'level':>9} {'req':>5} {'ok':>5} {'TTFT p50/p99 ms':>17} {'ITL p50/p99 ms':>16} "
            f"{'TPOT p50 ms':>11} {'E2E p50/p99 ms':>17} {'rps':>8} {'tok/s':>9} trusted")
    lines = [head]
    for lv in SweepReport.of(full).levels:
        label = f"c={lv.concurrency}" if not lv.is_rate else f"r={lv.rate:g}"
        tp = lv.throughput
        rps = "-" if tp.rps is None else f"{tp.rps:.2f}"
        tok = tp.output_tok_s
        tok_s = f"{tok:.1f}" if tok is not None else (
            f"{tp.images_per_min:.1f}/m" if tp.images_per_min is not None else "-")
        trusted = level_mark(lv.self_check)  # why: one note under the table (`pitwall probe`)
        lines.append(
            f"{label:>9} {lv.requests:>5} {lv.ok:>5} "
            f"{_ms(lv.ttft_s.p50) + '/' + _ms(lv.ttft_s.p99):>17} "
            f"{_ms(lv.itl_s.p50) + '/' + _ms(lv.itl_s.p99):>16} "
            f"{_ms(lv.tpot_s.p50):>11} "
            f"{_ms(lv.e2e_s.p50) + '/' + _ms(lv.e2e_s.p99):>17} "
            f"{rps:>8} {tok_s:>9} {trusted}"
        )
        if lv.errors:
            lines.append(" " * 10 + "errors: " + ", ".join(f"{k}={n}" for k, n in lv.errors.items()))
    return "\n".join(lines)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.1f}%"


def format_workload(full: SweepReport | dict[str, Any]) -> str:
    """Lines for the structured / turns / branches blocks of a report ("" when it has none)."""
    report = SweepReport.of(full)
    lines: list[str] = []
    st = report.structured
    if st:
        fails = ", ".join(f"{k}={n}" for k, n in st["failures"].items() if n) or "none"
        lines.append(f"structured {st['kind']} (backend {st['grammar_backend'] or '?'}): valid "
                     f"{_pct(st['valid_rate'])} of {st['finished']} finished; failures {fails}; "
                     f"cold-grammar TTFT {_ms(st['cold_ttft_s'])} ms vs warm p50 "
                     f"{_ms(st['warm_ttft_p50_s'])} ms")
        if st.get("refused"):
            lines.append(f"  refused by the server: {st['refused']['error_kind']} {st['refused']['message']}")
    for rows, step in ((report.turns, "turn"), (report.branches, "branch")):
        for row in rows or []:
            lines.append(f"{step} {row[step]}: {row['requests']} req, TTFT p50/p99 "
                         f"{_ms(row['ttft_p50_s'])}/{_ms(row['ttft_p99_s'])} ms, cache hit "
                         f"{_pct(row['cache_hit_rate'])}, input {row['input_tokens']} tok")
    return "\n".join(lines)
