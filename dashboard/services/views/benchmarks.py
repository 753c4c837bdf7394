"""Benchmarks: start a probe sweep from the dashboard, follow it, and shape its results for charts.

Flow (pages never do slow work: README.md, "How it fits together"):
1. `start_sweep()` (called by the page) stores a `pending` ProbeRun whose `spec` is the probe's
   SweepSpec dict, and an Intent(kind="probe", payload={"run_id": N}). Nothing runs yet.
2. The runner's probe lane carries it out (runner/sweeps.py: one sweep process, progress copied
   from ProbeRun.progress (0..1, finished requests / planned requests) into Intent.progress).
3. The page reads ProbeRun rows (`list_runs`, `curves`, `tradeoff`) and draws them.

Figures per level come from the run's report read as typed Levels (collectors/probe/report_model.py;
the figures are collectors/probe/report.py's): latencies in
seconds ({p50, p95, p99, mean, max}), throughput.output_tok_s and .rps, self_check.trusted; an
image server's runs (Server.kind "image", the images API) add the `image` block: per-image
latency and seconds per denoising step (seconds), and throughput.images_per_min.
A level whose self-check failed is drawn hollow; `trust_note` says once per run which levels
and why (the measured loop lag against its bound, or the client's CPU), the tables a short mark.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy.engine import Engine

from collectors.probe import trust
from collectors.probe.report_model import ImageFigures, Level, SelfCheck, Stats, SweepReport
from present import shown
from scorecard import metric_specs as mk
from storage import repo
from storage.errors import RequestError
from storage.models import Intent, ProbeRun

POLL_S = 1.0
PROMPT_SETS = ("builtin", "synthetic", "shared-prefix")
LATENCY_KEYS = {"ttft_s": "TTFT", "itl_s": "ITL", "tpot_s": "TPOT", "e2e_s": "E2E"}
IMAGE_SIZES = ("512x512", "768x768", "1024x1024", "1328x1328")
#: curve metric -> the block of a level's image figures (report_model.ImageFigures): image runs only, seconds
IMAGE_KEYS = {"per_image_s": "per_image_s", "s_per_step": "inference_s_per_step"}


class SweepRequestError(RequestError, ValueError):
    """A sweep request the page should refuse; the message says what to change."""


@dataclass(frozen=True)
class SweepRequest:
    server: str
    levels: list[int]
    requests: int
    prompt_set: str = "builtin"
    max_new_tokens: int = 64
    api: str = "generate"
    input_tokens: int = 128
    ignore_eos: bool = False
    name: str | None = None
    # images API only: resolution, denoising steps and guidance (None: the server's default)
    image_size: str = "1024x1024"
    image_steps: int | None = None
    image_guidance: float | None = None
    images_per_request: int = 1
    baseline_run_id: int | None = None  # a rerun of that run's workload (its outputs are compared)


def parse_levels(text: str) -> list[int]:
    """'1, 4, 8' -> [1, 4, 8]; raises SweepRequestError with what to type instead."""
    try:
        levels = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise SweepRequestError(
            f"Levels {text!r} are not whole numbers; type them like 1,4,8,16."
        ) from None
    if not levels or any(v <= 0 or v > 1024 for v in levels):
        raise SweepRequestError("Levels must be whole numbers between 1 and 1024, e.g. 1,4,8,16.")
    return sorted(set(levels))


def start_sweep(engine: Engine, req: SweepRequest, *, requested_by: str = "ui") -> tuple[int, int]:
    """Record a pending ProbeRun, a `probe` Intent for the runner and a `sweep_start` Audit row
    (actor `requested_by`); returns (run_id, intent_id)."""
    server = repo.get_server(engine, name=req.server)
    if server is None or server.id is None:
        raise SweepRequestError(f"Server {req.server!r} is not configured; pick one from the list.")
    if req.requests <= 0 or req.requests > 100_000:
        raise SweepRequestError("Requests per level must be between 1 and 100,000.")
    if req.prompt_set not in PROMPT_SETS:
        raise SweepRequestError(f"Workload {req.prompt_set!r} is unknown; use one of {list(PROMPT_SETS)}.")
    _check_api(req, server.name, server.kind)
    _check_role(server)
    launch = repo.latest_launch(engine, server_id=server.id)
    launch_id = launch.id if launch is not None and launch.ended_at is None else None
    spec: dict[str, Any] = {
        "url": server.base_url,
        "api": req.api,
        "mode": "concurrency",
        "levels": [float(v) for v in req.levels],
        "requests": int(req.requests),
        "server_id": server.id,
        "launch_id": launch_id,
        "name": req.name,
        "baseline_run_id": req.baseline_run_id,
        "workload": {
            "prompt_set": req.prompt_set,
            "max_new_tokens": int(req.max_new_tokens),
            "input_tokens": int(req.input_tokens),
            "ignore_eos": bool(req.ignore_eos),
        },
    }
    if req.api == "images":
        spec["workload"].update(image_size=req.image_size, image_steps=req.image_steps,
                                image_guidance=req.image_guidance,
                                images_per_request=int(req.images_per_request))
    return record_probe(engine, server.id, spec, requested_by=requested_by, target=req.server,
                   detail={"levels": list(req.levels), "requests": int(req.requests),
                           "prompt_set": req.prompt_set, "api": req.api})


def start_sweep_from_spec(engine: Engine, server_name: str, spec: dict[str, Any], *, name: str | None,
                          baseline_run_id: int | None, requested_by: str = "ui") -> tuple[int, int]:
    """`start_sweep` for a stored spec taken as it is (a rerun of a finished sweep): only the url,
    server_id, launch_id (the server's running launch), name and baseline_run_id are replaced, so
    the workload, mode, levels and requests (None included) stay what the stored run measured.
    Same rows and audit as `start_sweep`; returns (run_id, intent_id)."""
    server = repo.get_server(engine, name=server_name)
    if server is None or server.id is None:
        raise SweepRequestError(f"Server {server_name!r} is not configured; pick one from the list.")
    _check_role(server)
    launch = repo.latest_launch(engine, server_id=server.id)
    launch_id = launch.id if launch is not None and launch.ended_at is None else None
    spec = {k: v for k, v in spec.items() if k != "api_key"}  # the runner adds the server's own key
    spec = {**spec, "url": server.base_url, "server_id": server.id, "launch_id": launch_id,
            "name": name, "baseline_run_id": baseline_run_id}
    work = spec.get("workload") or {}
    return record_probe(engine, server.id, spec, requested_by=requested_by, target=server_name,
                   detail={"levels": list(spec.get("levels") or []), "requests": spec.get("requests"),
                           "prompt_set": work.get("prompt_set"), "api": spec.get("api")})


def record_probe(engine: Engine, server_id: int, spec: dict[str, Any], *, requested_by: str, target: str,
                 detail: dict[str, Any], action: str = "sweep_start") -> tuple[int, int]:
    """The pending ProbeRun, the `probe` intent and the audit row (`action`) for `spec` (a sweep's,
    or a replay's: runner/sweeps.py runs either)."""
    run = repo.create_probe_run(engine, server_id=server_id, launch_id=spec.get("launch_id"),
                                url=str(spec["url"]), api=str(spec.get("api") or "generate"), name=spec.get("name"), spec=spec,
                                status="pending", baseline_run_id=spec.get("baseline_run_id"))
    assert run.id is not None
    intent = repo.create_intent(engine, kind="probe", server_id=server_id, payload={"run_id": run.id},
                                requested_by=requested_by)
    assert intent.id is not None
    repo.add_audit(engine, actor=requested_by, action=action, target=target,
                   detail={"run_id": run.id, "intent_id": intent.id, **detail})
    return run.id, intent.id


def _check_role(server: Any) -> None:
    """A disaggregated service's prefill or decode server answers only requests its router pairs:
    a sweep goes to the router."""
    if server.role in ("prefill", "decode"):
        raise SweepRequestError(f"{server.name} is the {server.role} server of service {server.service}: it "
                                "answers only requests its router pairs (a bootstrap room). Sweep the service's "
                                "router instead.")


def _check_api(req: SweepRequest, name: str, kind: str | None) -> None:
    """Refuse a request whose API does not fit the server's kind (an LLM sweep against an image
    server fails every request with HTTP 404), and image settings out of range."""
    if kind == "image" and req.api != "images":
        raise SweepRequestError(f"{name} is an image server; sweep it with the images API "
                                "(image size, steps, images per request).")
    if kind != "image" and req.api == "images":
        raise SweepRequestError(f"{name} is an LLM server; the images API is for image servers.")
    if req.api != "images":
        return
    if not re.fullmatch(r"[1-9][0-9]{1,4}x[1-9][0-9]{1,4}", req.image_size):
        raise SweepRequestError(f"Image size {req.image_size!r} is not WIDTHxHEIGHT; use e.g. 1024x1024.")
    if req.image_steps is not None and not 1 <= req.image_steps <= 1000:
        raise SweepRequestError("Steps must be between 1 and 1,000 (or left to the server).")
    if not 1 <= req.images_per_request <= 16:
        raise SweepRequestError("Images per request must be between 1 and 16.")


def server_kind(engine: Engine, name: str) -> str:
    """The server's kind, "llm" or "image" (Server.kind), which picks the sweep form and charts."""
    s = repo.get_server(engine, name=name)
    return "image" if s is not None and s.kind == "image" else "llm"


def server_id(engine: Engine, name: str) -> int | None:
    s = repo.get_server(engine, name=name)
    return s.id if s is not None else None


def server_status(engine: Engine, name: str) -> str:
    """up | down | launching | unknown (the Overview's rule), to warn before a sweep."""
    from dashboard.services.views.overview import server_detail

    detail = server_detail(engine, name)
    return detail.status if detail is not None else "unknown"


def get_run(engine: Engine, *, run_id: int) -> ProbeRun | None:
    """One run as the page may show it (error and URL redacted: present/shown.py)."""
    return shown.probe_run(repo.get_probe_run(engine, run_id=run_id))


def active_sweeps(engine: Engine, *, server_id: int | None = None) -> list[tuple[Intent, ProbeRun | None]]:
    """Probe intents still pending or running, each with its ProbeRun (progress lives there)."""
    out = []
    for it in repo.list_intents(engine, server_id=server_id, states=("pending", "running"), kinds=("probe",)):
        run_id = (it.payload or {}).get("run_id")
        run = repo.get_probe_run(engine, run_id=int(run_id)) if run_id else None
        shown_it = shown.intent(it)
        assert shown_it is not None
        out.append((shown_it, shown.probe_run(run)))
    return out


def list_runs(engine: Engine, *, server_id: int | None = None, limit: int = 50) -> pd.DataFrame:
    """One row per run: id, name, success_rate (ok / measured requests, 0-1), status, progress,
    created, levels, trusted, fingerprint, error."""
    rows = []
    for r in repo.list_probe_runs(engine, server_id=server_id, limit=limit):
        spec = r.spec or {}
        wl = spec.get("workload") or {}
        levels = _levels(r)
        sent = sum(int(lv.requests or 0) for lv in levels)
        ok = sum(int(lv.ok or 0) for lv in levels)
        rows.append(
            {
                "id": r.id,
                "name": r.name or f"run {r.id}",
                mk.SUCCESS_RATE: ok / sent if sent else None,
                "status": r.status,
                "progress": float(r.progress or 0.0),
                "created_at": r.created_at,
                "api": r.api,
                "workload": _workload_label(r.api, wl),
                "levels": ", ".join(f"{v:g}" for v in spec.get("levels", [])),
                "requests": spec.get("requests"),
                "trusted": r.trusted,
                "trust": "—" if r.status == "failed" else trust.run_mark(r.trusted, levels),
                "fingerprint": (r.fingerprint or "")[:12],
                "error": r.error,
            }
        )
    cols = ["id", "name", mk.SUCCESS_RATE, "status", "progress", "created_at", "api", "workload",
            "levels", "requests", "trusted", "trust", "fingerprint", "error"]
    return shown.frame(pd.DataFrame(rows, columns=cols), ("error",))


def _workload_label(api: str | None, wl: dict[str, Any]) -> str:
    """The runs table's workload cell: the prompt set, and for image runs size and steps."""
    if api != "images":
        return str(wl.get("prompt_set", "—"))
    steps = f"{wl['image_steps']} steps" if wl.get("image_steps") else "server's steps"
    n = int(wl.get("images_per_request") or 1)
    return f"{wl.get('image_size', '?')}, {steps}" + (f", {n} images" if n > 1 else "")


def _levels(run: ProbeRun) -> list[Level]:
    return SweepReport.of(run.report).levels


def _level_value(lv: Level) -> float | None:
    v = lv.rate if lv.is_rate else lv.concurrency
    return float(v) if v is not None else None


def curves(engine: Engine, *, run_ids: list[int]) -> pd.DataFrame:
    """Long table for the concurrency curves of the chosen runs.

    Columns: run, series ("run 3 · TTFT p99"), level, metric (ttft_s…/output_tok_s/rps; image
    runs: per_image_s, s_per_step (seconds), images_per_min),
    stat (p50/p95/p99/-), value (base units), trusted (the level's self-check).
    """
    rows = []
    for rid in run_ids:
        run = repo.get_probe_run(engine, run_id=rid)
        if run is None:
            continue
        label = run.name or f"run {rid}"
        # one run plotted: its name is in the picker, the legend says only the figure
        named = (lambda what: what) if len(run_ids) == 1 else (lambda what, lb=label: f"{lb} · {what}")
        for lv in _levels(run):
            level = _level_value(lv)
            trusted = bool(lv.trusted)
            for key, short in LATENCY_KEYS.items():
                st: Stats = getattr(lv, key)
                for p in ("p50", "p95", "p99"):
                    if (v := getattr(st, p)) is not None:
                        rows.append((rid, named(f"{short} {p}"), level, key, p, float(v), trusted))
            tp = lv.throughput
            for key, v in ((mk.OUTPUT_TOK_S, tp.output_tok_s), (mk.RPS, tp.rps), (mk.IMAGES_PER_MIN, tp.images_per_min)):
                if v is not None:
                    rows.append((rid, label, level, key, "-", float(v), trusted))
            for key, block in IMAGE_KEYS.items():
                st = getattr(lv.image, block) if lv.image is not None else Stats()
                for p in ("p50", "p99"):
                    if (v := getattr(st, p)) is not None:
                        # one metric a chart (its title names it): the series is run and stat
                        rows.append((rid, named(p), level, key, p, float(v), trusted))
    return pd.DataFrame(rows, columns=["run", "series", "level", "metric", "stat", "value", "trusted"])


def tradeoff(engine: Engine, *, run_ids: list[int]) -> pd.DataFrame:
    """One point per (run, level): output tok/s vs TTFT p99 (s), with the level's trust flag."""
    rows = []
    for rid in run_ids:
        run = repo.get_probe_run(engine, run_id=rid)
        if run is None:
            continue
        label = run.name or f"run {rid}"
        for lv in _levels(run):
            tok, p99 = lv.throughput.output_tok_s, lv.ttft_s.p99
            if tok is None or p99 is None:
                continue
            rows.append((label, _level_value(lv), float(tok), float(p99), bool(lv.trusted)))
    return pd.DataFrame(rows, columns=["series", "level", mk.OUTPUT_TOK_S, mk.TTFT_P99_S, "trusted"])


def level_table(run: ProbeRun) -> pd.DataFrame:
    """Per-level figures of one run for a table (base units; the page formats them)."""
    rows = []
    for lv in _levels(run):
        sc = lv.self_check or SelfCheck()
        tp = lv.throughput
        image = lv.image or ImageFigures()
        rows.append(
            {
                "level": _level_value(lv),
                "requests": lv.requests if lv.has("requests") else None,
                "ok": lv.ok if lv.has("ok") else None,
                mk.SUCCESS_RATE: lv.success_rate,
                mk.TTFT_P50_S: lv.ttft_s.p50,
                mk.TTFT_P99_S: lv.ttft_s.p99,
                mk.ITL_P50_S: lv.itl_s.p50,
                mk.E2E_P99_S: lv.e2e_s.p99,
                mk.OUTPUT_TOK_S: tp.output_tok_s,
                mk.RPS: tp.rps,
                "per_image_p50_s": image.per_image_s.p50,
                "per_image_p99_s": image.per_image_s.p99,
                "s_per_step_p50": image.inference_s_per_step.p50,
                mk.IMAGES_PER_MIN: tp.images_per_min,
                "trusted": sc.trusted,
                "trust": trust.level_mark(sc),
                "why_not_trusted": "; ".join(sc.reasons or []),
                "errors": ", ".join(f"{k}={n}" for k, n in (lv.errors or {}).items()),
            }
        )
    return pd.DataFrame(rows)


def step_table(run: ProbeRun) -> pd.DataFrame:
    """Per-turn (multi-turn) or per-branch (fork) rows of a run's report, with a `step` label
    column ("turn 1", "branch 2"); empty for other workloads."""
    report = SweepReport.of(run.report)
    for rows, name in ((report.turns or [], "turn"), (report.branches or [], "branch")):
        if rows:
            df = pd.DataFrame(rows)
            df.insert(0, "step", [f"{name} {r.get(name)}" for r in rows])
            return df
    return pd.DataFrame()


def trust_note(run: ProbeRun) -> str | None:
    """One plain-words note per run on why some of its levels are not trusted (None when all
    are): collectors/probe/trust.py, shared with `pitwall probe`."""
    return trust.run_note(_levels(run))
