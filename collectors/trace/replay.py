"""Open-loop replay of a stored trace: each request is sent at its scheduled time, whatever the
server is doing, and timed from that time.

- **Schedule**: request i is due at `(arrival_i - window start) / speed` seconds after the run's
  start (`lead_s` after the client is ready). A dispatcher sleeps until each due time and starts
  the request as its own task, so a slow answer never delays a later send.
- **No coordinated omission**: TTFT and E2E count from the due time, not from when the client
  got round to sending (`ttft_s` = schedule lag + the TTFT the client measured). The schedule lag
  (send - due) is reported beside the figures (p50, p99, max); a run whose lag p99 passes its bound
  (`lag_bound`: max(10 ms, 5 % of the p50 TTFT or E2E)) is not trusted, and the reason says so.
- **Sessions** replay in order: turn k waits for turn k-1's answer and sends the real history
  (its prompt, the server's answer, new words up to the turn's length: collectors/trace/synth.py);
  a turn is due at the later of its own time and its predecessor's answer, and its lag counts
  from there.
- **Prefixes**: prompts are built from the trace's prefix blocks (synth.py), so requests that
  shared blocks in the trace share text here and the radix cache sees the same reuse.
- **Lengths**: `max_new_tokens` is the request's output length with `ignore_eos` (the engine's
  extension of the OpenAI APIs too), so each answer is as long as the trace's was.
- Rows the source marked failed (BurstGPT's zero-output rows) are not sent; aborted ones are
  (they were traffic the server received).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from collectors.probe.client import RequestRecord, make_session, send
from collectors.probe.stats import stats
from collectors.probe.workloads import Prompt, WorkloadSpec, request_body
from collectors.trace.model import TRACE_APIS, TraceRequest
from collectors.trace.synth import UNCALIBRATED, Calibration, next_turn, prompt_text

DEFAULT_OUTPUT_TOKENS = 128  # a request whose trace row has no output length
LAG_FLOOR_S = 0.010  # a loaded 2-core host wakes timers a few ms late; below any TTFT worth replaying
LAG_SHARE_MAX = 0.05


@dataclass(slots=True)
class ReplayOptions:
    speed: float = 1.0
    start_s: float | None = None  # window of the trace, in its own seconds
    end_s: float | None = None
    max_requests: int | None = None
    api: str | None = None  # forces one API; None: each request's own, else generate
    model: str | None = None
    timeout_s: float = 300.0
    lead_s: float = 0.25
    api_key: str | None = None
    seed: int = 0


@dataclass(slots=True)
class Due:
    req: TraceRequest
    at_s: float  # due this long after the run's start
    api: str
    max_new_tokens: int
    sampling: dict[str, Any]
    prompt: str
    calibration: Calibration = UNCALIBRATED


@dataclass(slots=True)
class Plan:
    items: list[Due]
    skipped_failed: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        return self.items[-1].at_s if self.items else 0.0

    @property
    def offered_rps(self) -> float | None:
        """The rate the plan sends at (requests/s over its span, to 3 decimals): the run's one load
        level, on its request rows, in its report and in its spec alike."""
        return round((len(self.items) - 1) / self.duration_s, 3) if self.duration_s > 0 else None


def _api(r: TraceRequest, options: ReplayOptions) -> str:
    if options.api:
        return options.api
    return r.api if r.api in TRACE_APIS else "generate"


def select(requests: Sequence[TraceRequest], options: ReplayOptions) -> tuple[list[TraceRequest], int]:
    """The requests a replay sends (the window, the cap; the source's failed rows left out) and
    how many failed rows the window held."""
    chosen = [r for r in requests if (options.start_s is None or r.arrival_s >= options.start_s)
              and (options.end_s is None or r.arrival_s < options.end_s)]
    failed = sum(1 for r in chosen if r.status == "failed")
    chosen = [r for r in chosen if r.status != "failed"]
    if options.max_requests is not None:
        chosen = chosen[: options.max_requests]
    return chosen, failed


def apis(requests: Sequence[TraceRequest], options: ReplayOptions) -> list[str]:
    """The APIs the selected requests go through (what calibration measures)."""
    return list(dict.fromkeys(_api(r, options) for r in select(requests, options)[0]))


def span_s(requests: Sequence[TraceRequest], options: ReplayOptions) -> float:
    """Seconds of the trace the selected requests cover (at speed 1)."""
    chosen = select(requests, options)[0]
    return chosen[-1].arrival_s - chosen[0].arrival_s if chosen else 0.0


def plan(requests: Sequence[TraceRequest], block_size: int | None, options: ReplayOptions,
         calibration: dict[str, Calibration] | None = None) -> Plan:
    if options.speed <= 0:
        raise ValueError("--speed must be > 0")
    chosen, failed = select(requests, options)
    base = chosen[0].arrival_s if chosen else 0.0
    items = []
    for r in chosen:
        sampling = {k: v for k, v in (r.sampling or {}).items() if k in ("temperature", "top_p", "top_k")}
        api = _api(r, options)
        cal = (calibration or {}).get(api, UNCALIBRATED)
        items.append(Due(req=r, at_s=(r.arrival_s - base) / options.speed, api=api,
                         max_new_tokens=max(1, r.output_tokens or DEFAULT_OUTPUT_TOKENS), sampling=sampling,
                         prompt=prompt_text(seq=r.seq, input_tokens=r.input_tokens, hash_ids=r.hash_ids,
                                            block_size=block_size, seed=options.seed, calibration=cal),
                         calibration=cal))
    out = Plan(items=items, skipped_failed=failed)
    if failed:
        out.notes.append(f"{failed} request(s) the source marked failed were not sent")
    if any(r.output_tokens is None for r in chosen):
        out.notes.append(f"requests without an output length asked for {DEFAULT_OUTPUT_TOKENS} tokens")
    return out


@dataclass(slots=True)
class Sent:
    due: Due
    record: RequestRecord
    lag_s: float


def _body(due: Due, prompt: str, options: ReplayOptions) -> tuple[str, dict[str, Any]]:
    spec = WorkloadSpec(max_new_tokens=due.max_new_tokens, ignore_eos=True, model=options.model,
                        temperature=float(due.sampling.get("temperature", 0.0)), top_p=due.sampling.get("top_p"),
                        top_k=due.sampling.get("top_k"),
                        # an image generation: the request's image count where the trace keeps one
                        images_per_request=max(1, min(16, int(due.req.images or 1))) if due.api == "images" else 1)
    return request_body(due.api, Prompt(id=str(due.req.seq), text=prompt), spec)


async def replay(base_url: str, p: Plan, options: ReplayOptions,
                 on_progress: Callable[[int, int], None] | None = None) -> list[Sent]:
    """Send every request of the plan at its due time; one Sent per request, in plan order."""
    answers: dict[tuple[str, int], asyncio.Future[tuple[str, str, float]]] = {}
    loop = asyncio.get_running_loop()
    for d in p.items:
        if d.req.session is not None and d.req.turn is not None:
            answers[(d.req.session, d.req.turn)] = loop.create_future()
    results: list[Sent | None] = [None] * len(p.items)
    done = 0

    async with make_session(api_key=options.api_key) as session:
        t0 = time.perf_counter() + options.lead_s

        async def one(i: int, d: Due) -> None:
            key = (d.req.session, d.req.turn) if d.req.session is not None and d.req.turn is not None else None
            try:
                await send_one(i, d, key)
            finally:  # a later turn never waits on a turn that failed to finish
                if key is not None and key in answers and not answers[key].done():
                    answers[key].set_result(("", "", time.perf_counter()))

        async def send_one(i: int, d: Due, key: tuple[str, int] | None) -> None:
            nonlocal done
            due_at = t0 + d.at_s
            prompt = d.prompt
            if key is not None and key[1] > 1 and (key[0], key[1] - 1) in answers:
                history, answer, answered_at = await answers[(key[0], key[1] - 1)]
                due_at = max(due_at, answered_at)
                prompt = next_turn(history, answer, seq=d.req.seq, input_tokens=d.req.input_tokens, seed=options.seed,
                                   calibration=d.calibration)
            path, body = _body(d, prompt, options)
            rec = await send(session, base_url.rstrip("/") + path, d.api, json.dumps(body).encode(), level=p.offered_rps or 0.0,
                             seq=i, timeout_s=options.timeout_s, keep_text=key is not None)
            lag = max(0.0, rec.t_start - due_at)
            if rec.ttft_s is not None:
                rec.ttft_s += lag
            if rec.e2e_s is not None:
                rec.e2e_s += lag
            rec.detail = {**(rec.detail or {}), "trace_seq": d.req.seq, "due_s": round(d.at_s, 6),
                          "lag_s": round(lag, 6), "turn": d.req.turn, "session": d.req.session}
            if key is not None and key in answers:
                answers[key].set_result((prompt, rec.output_text or "", time.perf_counter()))
            rec.output_text = None
            results[i] = Sent(due=d, record=rec, lag_s=lag)
            done += 1
            if on_progress is not None:
                on_progress(done, len(p.items))

        tasks = []
        for i, d in enumerate(p.items):
            wait = t0 + d.at_s - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            tasks.append(asyncio.create_task(one(i, d)))
        await asyncio.gather(*tasks)
    return [s for s in results if s is not None]


CALIBRATION_WORDS = (40, 200)


async def calibrate(base_url: str, apis: Sequence[str], options: ReplayOptions) -> tuple[dict[str, Calibration], list[str]]:
    """Per API, the server's tokens per synthetic word and the tokens it adds to every prompt:
    two one-token requests (40 and 200 words) before the replay starts, never part of it."""
    out: dict[str, Calibration] = {}
    notes: list[str] = []
    async with make_session(api_key=options.api_key) as session:
        for api in dict.fromkeys(apis):
            counts = []
            for n in CALIBRATION_WORDS:
                due = Due(req=TraceRequest(seq=-1, arrival_s=0.0, input_tokens=n, output_tokens=1), at_s=0.0, api=api,
                          max_new_tokens=1, sampling={}, prompt="")
                path, body = _body(due, prompt_text(seq=-1 - n, input_tokens=n, hash_ids=None, block_size=None), options)
                rec = await send(session, base_url.rstrip("/") + path, api, body, timeout_s=options.timeout_s)
                counts.append(rec.tokens_in if rec.ok else None)
            a, b = counts
            if a is None or b is None or b <= a:
                notes.append(f"{api}: the server did not report prompt tokens, so prompts are sized as one token a word")
                continue
            slope = (b - a) / (CALIBRATION_WORDS[1] - CALIBRATION_WORDS[0])
            out[api] = Calibration(tokens_per_word=slope, overhead_tokens=max(0.0, a - slope * CALIBRATION_WORDS[0]))
            notes.append(f"{api}: {slope:.2f} tokens a word, {out[api].overhead_tokens:.0f} added to every prompt (measured)")
    return out, notes


def report(sent: Sequence[Sent], p: Plan, options: ReplayOptions) -> dict[str, Any]:
    """What the run measured; keys documented in collectors/trace/replay_run.py."""
    ok = [s for s in sent if s.record.ok]
    errors: dict[str, int] = {}
    for s in sent:
        if not s.record.ok:
            errors[s.record.error_kind or "error"] = errors.get(s.record.error_kind or "error", 0) + 1
    lags = [s.lag_s for s in sent]
    ttft = stats([s.record.ttft_s for s in ok])
    e2e = stats([s.record.e2e_s for s in ok])
    reference = ttft.get("p50") or e2e.get("p50") or 0.0
    bound = max(LAG_FLOOR_S, LAG_SHARE_MAX * reference)
    lag = stats(lags)
    trusted = bool(sent) and (lag.get("p99") or 0.0) <= bound
    starts = [s.record.t_start for s in sent]
    span = (max(starts) - min(starts)) if len(starts) > 1 else None
    tokens_out = sum(s.record.tokens_out or 0 for s in ok)
    ends = [s.record.t_end for s in ok]
    wall = (max(ends) - min(starts)) if ok and starts else None
    untrusted = None if trusted else (
        f"the client sent late: schedule lag p99 {1000 * (lag.get('p99') or 0):.1f} ms is over its bound "
        f"{1000 * bound:.1f} ms (max(10 ms, 5 % of the p50 {'TTFT' if ttft.get('p50') else 'E2E'})); "
        "the latencies include the client's own delay: replay slower (--speed) or on a quieter host")
    offered = p.offered_rps
    throughput = {"rps": len(ok) / wall if wall else None, "output_tok_s": tokens_out / wall if wall else None}
    # the run as one open-loop level at the trace's offered rate, in the sweep report's shape
    # (collectors/probe/report_model.py Level): Benchmarks, Compare and the scorecard read it as they
    # read a sweep's level; the schedule lag is its self-check
    level = {"rate": offered, "requests": len(sent), "ok": len(ok), "errors": errors, "ttft_s": ttft,
             "itl_s": stats([g for s in ok for g in s.record.itl_s]), "tpot_s": stats([s.record.tpot_s for s in ok]),
             "e2e_s": e2e, "throughput": throughput,
             "self_check": {"loop_lag_p99_s": lag.get("p99"), "lag_bound_s": bound, "lag_basis": "schedule lag",
                            "trusted": trusted, "reasons": [] if trusted else [untrusted]},
             "success_rate": len(ok) / len(sent) if sent else None, "planned_requests": len(p.items)}
    return {
        "levels": [level],
        "mode": "trace", "speed": options.speed, "window": [options.start_s, options.end_s],
        "requests": len(sent), "ok": len(ok), "errors": errors,
        "success_rate": len(ok) / len(sent) if sent else None,
        "ttft_s": ttft, "e2e_s": e2e, "itl_s": stats([g for s in ok for g in s.record.itl_s]),
        "schedule_lag_s": lag, "lag_bound_s": bound, "trusted": trusted, "untrusted_reason": untrusted,
        "offered_rps": offered,
        "achieved_rps": (len(sent) - 1) / span if span else None,
        "output_tok_s": tokens_out / wall if wall else None,
        "tokens_out": tokens_out, "tokens_in": sum(s.record.tokens_in or 0 for s in ok),
        "expected_tokens_out": sum(s.due.max_new_tokens for s in ok),
        "skipped_failed": p.skipped_failed, "notes": p.notes,
    }
