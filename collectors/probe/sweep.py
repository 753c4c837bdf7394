"""A whole probe sweep: levels one after another, records stored, report built.

Entry points:
- `await run_sweep(spec, engine=...)` in-process (tests, the CLI: the CLI process *is* the one
  process of its sweep);
- the runner's probe lane runs each sweep in a process of its own (runner/sweeps.py starts
  `python -m runner.sweep_child`, which calls run_sweep), so a sweep's event loop never shares a
  core's GIL with the collectors.

One process drives every level; aiohttp holds about c=128 streams at 100 tok/s on one core
(at >= 90 % of ideal throughput). Spreading one level over several processes is not implemented: above
that the self-check marks the level untrusted (client CPU / loop lag) instead.

Progress: `ProbeRun.progress` (0..1 = finished requests / planned requests, warm-up included) is
written at most once a second from a worker thread, so the database never stalls the event loop;
those writes land only while the run is `running` (store.update_progress), so a write still in
flight when the sweep concludes cannot overwrite the final progress. ProbeRequest rows are written
between levels, never during one.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy.engine import Engine

from collectors.probe import programs, store, structured
from collectors.probe.client import RequestRecord, get_json, make_session, send
from collectors.probe.consistency import compare_outputs, consistency_warnings
from collectors.probe.fingerprint import fingerprint_detail, fingerprint_hash
from collectors.probe.images import CHECK_PROMPTS, check_entry
from collectors.probe.pacing import LevelPlan, SendFn, run_level
from collectors.probe.report import level_report
from collectors.probe.report_model import Level, SweepReport
from collectors.probe.workloads import (
    Prompt,
    WorkloadSpec,
    api_paths,
    build_prompts,
    history_messages,
    request_body,
)

#: on_progress(finished requests, planned requests, level label)
ProgressFn = Callable[[int, int, str], None]


@dataclass(slots=True)
class SweepSpec:
    """Everything a sweep needs; JSON-able (`to_dict` / `from_dict`), stored as ProbeRun.spec."""

    url: str
    api: str = "generate"
    mode: str = "concurrency"  # concurrency | rate
    levels: list[float] = field(default_factory=lambda: [1, 4, 8, 16])
    requests: int | None = None  # measured requests per level; None -> max(50, 5 x level)
    warmup: int | None = None  # warm-up requests per level; None -> the level (at least 1)
    timeout_s: float = 120.0
    max_duration_s: float | None = None  # per level
    abort_error_rate: float | None = 0.5
    abort_min_requests: int = 10
    stagger_s: float = 0.001
    api_key: str | None = None
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    seed: int = 0
    discover_model: bool = True
    baseline_run_id: int | None = None
    server_id: int | None = None
    launch_id: int | None = None
    name: str | None = None

    def to_dict(self, *, redact: bool = True) -> dict[str, Any]:
        d = asdict(self)
        if redact and d.get("api_key"):
            d["api_key"] = "***"  # never store a secret in ProbeRun.spec
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepSpec:
        data = dict(data)
        wl = data.pop("workload", None) or {}
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"Unknown sweep field(s) {unknown}; known: {sorted(known)}.")
        return cls(**data, workload=WorkloadSpec.from_dict(wl))

    def validate(self) -> None:
        apis = api_paths()
        if self.api not in apis:
            raise ValueError(f"Unknown API {self.api!r}; use one of {list(apis)}.")
        if self.mode not in ("concurrency", "rate"):
            raise ValueError(f"Unknown load mode {self.mode!r}; use 'concurrency' or 'rate'.")
        if not self.levels or any(v <= 0 for v in self.levels):
            raise ValueError("Levels must be a non-empty list of positive numbers.")
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"URL {self.url!r} must start with http:// or https://.")
        wl = self.workload
        if wl.structured is not None:
            if wl.structured not in structured.KINDS:
                raise ValueError(f"Unknown structured kind {wl.structured!r}; use one of {list(structured.KINDS)}.")
            if self.api == "images":
                raise ValueError("Structured output needs an LLM API (generate, completions, chat), not images.")
            if not wl.structured_spec:
                raise ValueError("A structured run needs its schema / pattern (structured_spec).")

    def requests_for(self, level: float) -> int:
        return self.requests if self.requests is not None else max(50, math.ceil(5 * level))

    def warmup_for(self, level: float) -> int:
        return self.warmup if self.warmup is not None else max(1, math.ceil(level))


async def _discover_model(session: Any, url: str) -> str | None:
    models = await get_json(session, url + "/v1/models")
    if isinstance(models, dict) and isinstance(models.get("data"), list) and models["data"]:
        mid = models["data"][0].get("id") if isinstance(models["data"][0], dict) else None
        if mid:
            return str(mid)
    info = await get_json(session, url + "/model_info")
    if isinstance(info, dict) and info.get("model_path"):
        return str(info["model_path"])
    return None


async def run_sweep(
    spec: SweepSpec,
    *,
    engine: Engine | None = None,
    run_id: int | None = None,
    on_progress: ProgressFn | None = None,
) -> SweepReport:
    """Run every level; store the run (the report's `to_dict()`) when `engine` is given; return
    the full report."""
    spec.validate()
    prompts = build_prompts(spec.workload)  # WorkloadError before anything is stored
    base = spec.url.rstrip("/")
    wl = spec.workload
    kind, wire = wl.structured, None
    if kind is not None and wl.structured_spec is not None:
        wire = structured.wire_spec(kind, wl.structured_spec, uuid.uuid4().hex[:12])
    bodies = [(path, json.dumps(body).encode()) for path, body in
              (request_body(spec.api, p, wl, constraint=wire) for p in prompts)]
    measured_levels: list[tuple[float, list[RequestRecord]]] = []
    planned = [spec.requests_for(v) + spec.warmup_for(v) for v in spec.levels]
    total = sum(planned)
    # a stored report has the keys put so far, in that order: error and trusted only once concluded
    report = SweepReport.keyed(run_id=run_id, status="running", levels=[])
    state: dict[str, Any] = {"done": 0, "label": "", "written": -1.0}
    # image runs: prompt indices whose image is kept (or being fetched) for the output check
    claimed: set[int] = set()

    async with make_session(api_key=spec.api_key) as session:
        model = spec.workload.model
        if model is None and spec.discover_model:
            model = await _discover_model(session, base)
        detail = fingerprint_detail(
            api=spec.api, model=model, workload=spec.workload, prompts=prompts, mode=spec.mode,
            levels=spec.levels, requests_per_level=[spec.requests_for(v) for v in spec.levels],
            warmup_per_level=[spec.warmup_for(v) for v in spec.levels],
        )
        fp = fingerprint_hash(detail)
        report.put(fingerprint=fp, fingerprint_detail=detail, n_prompts=len(prompts))
        backend = await _grammar_backend(session, base) if kind else None
        if engine is not None:
            run_id = report.run_id = await _start_run(engine, spec, run_id, fp, detail)
        writer = asyncio.create_task(_progress_writer(engine, run_id, state, total)) if engine else None
        status = "failed"
        error: str | None = "interrupted before the sweep finished"
        try:
            for i, value in enumerate(spec.levels):
                label = f"c={int(value)}" if spec.mode == "concurrency" else f"r={value:g}/s"
                state["label"] = label
                plan = LevelPlan(
                    mode=spec.mode, value=value, requests=spec.requests_for(value),
                    warmup=spec.warmup_for(value), stagger_s=spec.stagger_s,
                    max_duration_s=spec.max_duration_s, abort_error_rate=spec.abort_error_rate,
                    abort_min_requests=spec.abort_min_requests, seed=spec.seed + i,
                )

                one = _sender(spec, session, base, prompts, bodies, claimed, value, wire=wire)

                def done(_rec: RequestRecord) -> None:
                    state["done"] += 1
                    if on_progress is not None:
                        on_progress(int(state["done"]), total, str(state["label"]))

                result = await run_level(plan, one, done)
                await asyncio.to_thread(_attach_thumbnails, result.records, prompts,
                                        spec.workload.seed)
                lv = level_report(result, spec.api, image_steps=spec.workload.image_steps,
                                  images_per_request=spec.workload.images_per_request)
                measured_levels.append((value, result.records))
                _add_workload_blocks(report, lv, result.records, measured_levels, wl, backend)
                report.levels.append(lv)
                state["done"] = sum(planned[: i + 1])
                if engine is not None and run_id is not None:
                    await asyncio.to_thread(store.insert_requests, engine, run_id=run_id,
                                            records=result.records)
                    await asyncio.to_thread(store.update_run, engine, run_id=run_id,
                                            report=_jsonable(report.to_dict()))
                if result.stopped == "error_rate":
                    status = "aborted"
                    error = (f"Stopped at {label}: more than {spec.abort_error_rate:.0%} of requests "
                             f"failed ({lv.errors}); check the server and the URL / API.")
                    refused = (report.structured or {}).get("refused")
                    if refused:
                        error = (f"Stopped at {label}: the server refused the {kind} constraint as a "
                                 f"client error ({refused['error_kind']}: {refused['message']}); "
                                 "fix the schema / pattern.")
                    break
            else:
                status, error = "done", None
        except Exception as exc:  # stored as a failed run; the CLI turns it into one sentence
            status, error = "failed", f"{type(exc).__name__}: {exc}"
            raise
        finally:
            if writer is not None:
                writer.cancel()
            _conclude(report, spec, status, error, str(state["label"]))
            if engine is not None and run_id is not None:
                await _finish_run(engine, spec, run_id, report, detail, len(prompts),
                                  progress=1.0 if report.status == "done" else state["done"] / max(total, 1))
    return report


async def _start_run(engine: Engine, spec: SweepSpec, run_id: int | None, fp: str,
                     detail: dict[str, Any]) -> int:
    """Create the ProbeRun (or fill in the one the caller made: `run_id`) and mark it running."""
    fields: dict[str, Any] = dict(url=spec.url, api=spec.api, spec=spec.to_dict(), fingerprint=fp,
                                  fingerprint_detail=detail)
    if run_id is None:
        run_id = await asyncio.to_thread(
            store.create_run, engine, server_id=spec.server_id, launch_id=spec.launch_id,
            name=spec.name, baseline_run_id=spec.baseline_run_id, **fields)
    else:
        await asyncio.to_thread(store.update_run, engine, run_id=run_id, **fields)
    assert run_id is not None
    await asyncio.to_thread(store.update_run, engine, run_id=run_id, status="running",
                            started_at=time.time(), progress=0.0)
    return run_id


def _sender(spec: SweepSpec, session: Any, base: str, prompts: list[Prompt],
            bodies: list[tuple[str, bytes]], claimed: set[int], value: float, *,
            wire: str | None) -> SendFn:
    """One level's request function for run_level: picks the prompt's body, waits for the request
    it depends on (multi-turn, fork), sends, and releases the requests waiting on this one.
    `claimed`: image runs' prompt indices whose image is kept (or being fetched) for the check."""
    wl = spec.workload
    kind = wl.structured
    multi_turn = wl.prompt_set == "multi-turn"
    keep_text = kind is not None or multi_turn
    deps = programs.Dependencies(prompts)

    async def one(seq: int, warm: bool) -> RequestRecord:
        prompt = prompts[seq % len(prompts)]
        idx = seq % len(bodies)
        path, body = bodies[idx]
        keep = spec.api == "images" and idx < CHECK_PROMPTS and idx not in claimed
        if keep:
            claimed.add(idx)
        dep = deps.dependency(seq)
        history = None
        if dep is not None:
            await deps.wait(dep)  # before send() starts the clock
            if multi_turn:
                history = history_messages(prompt, deps.history.get(dep))
                body = json.dumps(request_body(spec.api, prompt, wl, messages=history,
                                               constraint=wire)[1]).encode()
        elif multi_turn:
            history = history_messages(prompt, None)
        rec: RequestRecord | None = None
        try:
            rec = await send(session, base + path, spec.api, body, level=value, seq=seq,
                             warmup=warm, timeout_s=spec.timeout_s, keep_text=keep_text,
                             keep_image=keep)
        finally:  # release the requests that run after this one, even when cancelled
            if history is not None:
                reply = (rec.output_text if rec is not None else None) or ""
                history = [*history, {"role": "assistant", "content": reply}]
            deps.finish(seq, history)
        _annotate(rec, prompt, kind, wl.structured_spec)
        if keep and rec.image_bytes is None:
            claimed.discard(idx)  # failed, or a url answer: a later request tries
        return rec

    return one


def _conclude(report: SweepReport, spec: SweepSpec, status: str, error: str | None,
              label: str) -> None:
    """The run's status, error and trusted flag, set on the report: a run where nothing
    succeeded fails, whatever stopped it (no figure of it means anything)."""
    why = all_failed(report.levels, spec.api) if status != "failed" else None
    if why is not None:
        stopped = f"; the sweep stopped at {label}" if status == "aborted" else ""
        status, error = "failed", why + stopped
    report.put(status=status, error=error, trusted=bool(report.levels) and all(lv.trusted for lv in report.levels))


async def _finish_run(engine: Engine, spec: SweepSpec, run_id: int, report: SweepReport,
                      detail: dict[str, Any], n_prompts: int, *, progress: float) -> None:
    """Store the concluded report (and its consistency check against the baseline run)."""
    if spec.baseline_run_id is not None and report.status != "failed":
        report.put(consistency=await asyncio.to_thread(
            _consistency, engine, spec.baseline_run_id, run_id, detail, n_prompts))
    await asyncio.to_thread(
        store.update_run, engine, run_id=run_id, status=report.status, error=report.error,
        progress=progress, finished_at=time.time(), report=_jsonable(report.to_dict()), trusted=report.trusted)


def all_failed(levels: list[Level], api: str) -> str | None:
    """One sentence when every measured request of every level failed (None otherwise): how
    many, the error kinds / HTTP statuses with their counts, and what the commonest one most
    likely means, e.g. "all 8 requests failed: HTTP 404 (the server does not serve /generate;
    is it an image server?)"."""
    sent = sum(int(lv.requests or 0) for lv in levels)
    if sent == 0 or any(int(lv.ok or 0) for lv in levels):
        return None
    counts: dict[str, int] = {}
    for lv in levels:
        for kind, n in (lv.errors or {}).items():
            counts[kind] = counts.get(kind, 0) + int(n)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    named = [(f"HTTP {k[5:]}" if k.startswith("http_") else k.replace("_", " "), n) for k, n in ranked]
    what = ", ".join(name if len(named) == 1 else f"{name} ×{n}" for name, n in named) or "no answer"
    hint = _failure_hint(ranked[0][0] if ranked else "", api)
    head = "its only request failed" if sent == 1 else f"all {sent} requests failed"
    return f"{head}: {what}" + (f" ({hint})" if hint else "")


def _failure_hint(kind: str, api: str) -> str:
    other = "an LLM server" if api == "images" else "an image server"
    return {
        "http_404": f"the server does not serve {api_paths().get(api, api)}; is it {other}?",
        "http_401": "the server wants an API key; set api_key for this server",
        "http_403": "the server refused the API key; check api_key for this server",
        "connect_refused": "nothing answers at the server's address; is it up?",
        "timeout": "no answer within the request timeout; is the server overloaded or stuck?",
    }.get(kind, "")


async def _grammar_backend(session: Any, base: str) -> str | None:
    """The server's grammar backend (`grammar_backend` in /server_info), None when not told."""
    info = await get_json(session, base + "/server_info")
    value = info.get("grammar_backend") if isinstance(info, dict) else None
    return str(value) if value else None


def _annotate(rec: RequestRecord, prompt: Prompt, kind: str | None, spec: str | None) -> None:
    """rec.detail: the program step ({"turn", "conversation"} / {"branch", "fork"}) and the
    structured verdict of a finished output (collectors/probe/structured.py)."""
    detail: dict[str, Any] = dict(prompt.step or {})
    if kind and spec and rec.ok:
        detail["structured"] = structured.check(kind, spec, rec.output_text or "", rec.finish_reason)
    rec.detail = {**(rec.detail or {}), **detail} or None  # beside an image answer's figures


def _add_workload_blocks(report: SweepReport, lv: Level, records: list[RequestRecord],
                         levels: list[tuple[float, list[RequestRecord]]], wl: WorkloadSpec,
                         backend: str | None) -> None:
    """The level's and the run's `turns` / `branches` / `structured` blocks (when the workload
    has them); run-level ones pool every level so far."""
    pooled = [r for _, recs in levels for r in recs]
    if wl.prompt_set == "multi-turn":
        lv.turns = programs.step_rows(records, "turn")
        report.put(turns=programs.step_rows(pooled, "turn"))
    elif wl.prompt_set == "fork":
        lv.branches = programs.step_rows(records, "branch")
        report.put(branches=programs.step_rows(pooled, "branch"), branch_reuse=programs.branch_summary(pooled))
    if wl.structured and wl.structured_spec:
        report.put(structured=structured.report(wl.structured, wl.structured_spec, backend, levels))


def _attach_thumbnails(records: list[RequestRecord], prompts: list[Any], seed: int) -> None:
    """Decode and shrink the kept images (a worker thread: Pillow off the event loop) into
    `detail["check"]` (collectors/probe/images.py); the raw bytes are dropped."""
    for rec in records:
        raw, rec.image_bytes = rec.image_bytes, None
        if raw is None:
            continue
        prompt = prompts[rec.seq % len(prompts)]
        rec.detail = dict(rec.detail or {})
        rec.detail["check"] = check_entry(raw, prompt_id=prompt.id, seed=seed)


def _consistency(engine: Engine, baseline_id: int, run_id: int, detail: dict[str, Any],
                 n_prompts: int) -> dict[str, Any]:
    base = store.get_run(engine, run_id=baseline_id)
    if base is None:
        return {"baseline_run_id": baseline_id, "error": f"baseline run {baseline_id} not found"}
    out = compare_outputs(store.output_rows(engine, run_id=baseline_id),
                          store.output_rows(engine, run_id=run_id), n_prompts)
    return {"baseline_run_id": baseline_id, **out,
            "warnings": consistency_warnings(base.get("fingerprint_detail"), detail)}


async def _progress_writer(engine: Engine | None, run_id: int | None, state: dict[str, Any],
                           total: int) -> None:
    while engine is not None and run_id is not None:
        await asyncio.sleep(1.0)
        frac = min(state["done"] / max(total, 1), 0.999)
        if frac != state["written"]:
            state["written"] = frac
            await asyncio.to_thread(store.update_progress, engine, run_id=run_id, progress=frac)


def _jsonable(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=str))
