"""Build a Scorecard for a server from storage: for a probe run, a launch, or a time window.

`build_scorecard(engine, server=..., run_id=... | launch_id=... | since_s=..., ...)` reads the
inputs through storage.repo (the only SQL) and hands them to compute.py (pure). Windows:

| subject | window | probe run used |
|---|---|---|
| run_id | the run's started_at -> finished_at (created_at / now when unset) | that run |
| launch_id | launch started_at -> ended_at (now while running) | newest finished run of that launch |
| since_s | now - since_s -> now | newest finished run that started inside the window |

A probe run attached to no server (`server_id` NULL: `pitwall probe` against an address no
configured server has) is scored from its own requests alone (run_only_inputs); its
server-side figures are absent and each says so.

GPU model and driver come from CollectorState `gpu:<server_id>:info` (or `gpu:info`) when the GPU
collector wrote one ({"name": ..., "driver": ...} or {"gpus": [{"index", "name"}, ...]}: only the
server's own cards, its gpu_indices, else those its `gpu.*` samples name), else "unknown". A card
in MIG mode (`gpu.<i>.mig<GPU_I_ID>.*` beside the card's `gpu.<i>.*`:
scorecard/gpu_entries.py) counts once: GPU count, GPU-hours and energy read the card's `<i>`; its
memory total is the card's own `mem_total_bytes`, else the sum of its instances' (never both).
Cross-check a scorecard's figures with `pitwall probe` (latency, throughput) and
`curl <server>/metrics` (server-side figures, the engine's series).

A scorecard goes into pages and every export, so its subject and provenance are redacted here,
once (storage/redact.py): the launch's argv, env and server args, the base URL, the workload
spec and event messages carry no secret into Markdown, HTML, CSV, JSON or PNG.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy.engine import Engine

from collectors.probe.report_model import SweepReport
from collectors.probe.trust import run_note
from config import __version__
from scorecard import definitions
from scorecard import math as sm
from scorecard import slo as slo_mod
from scorecard.compute import ScorecardInputs, compute_scorecard
from scorecard.gather import MEAN_KEYS as MEAN_KEYS  # the fleet view reads the same means
from scorecard.gather import gather_window, probe_detail
from scorecard.gpu_entries import parse_key
from scorecard.gpu_wall import gpu_walls
from scorecard.gpu_wall_stage import stage_walls
from scorecard.metric_specs import METRIC_SPECS
from scorecard.model import ENGINE_VERSION_FIELD, Scorecard
from scorecard.window_reads import WindowReads
from storage import repo
from storage import series_keys as sk
from storage.errors import RequestError
from storage.models import Launch, ProbeRun, Server
from storage.redact import redact_argv, redact_obj, redact_text, redact_url

#: Series kept on the scorecard for charts (bucketed, at most SERIES_POINTS per metric).
SERIES_KEYS = (
    sk.LOG_RUNNING_REQ,
    sk.LOG_QUEUE_REQ,
    sk.LOG_GEN_THROUGHPUT_TOK_S,
    sk.LOG_TOKEN_USAGE,
    sk.CANARY_TTFT_S,
    sk.hist_key("ttft", "p99"),
)
SERIES_POINTS = 240
EVENT_LIMIT = 200


class ScorecardError(RequestError, ValueError):
    """The scorecard cannot be built (unknown server, run or launch); says what to do."""


def card_mem_total(totals: dict[str, float]) -> float | None:
    """Σ over cards of the newest `mem_total_bytes`: a card's own figure, else the sum of its MIG
    instances' (a card that reports both is counted once). None without any. Pure."""
    own: dict[int, float] = {}
    instances: dict[int, float] = {}
    for key, value in totals.items():
        p = parse_key(key)
        if p is None or p[2] != "mem_total_bytes":
            continue
        if p[1] is None:
            own[p[0]] = value
        else:
            instances[p[0]] = instances.get(p[0], 0.0) + value
    total = sum(own.get(i, instances.get(i, 0.0)) for i in own.keys() | instances.keys())
    return total or None


def _window_label(since: float, until: float) -> str:
    span = until - since
    if span >= 3600:
        return f"{span / 3600:.1f} h"
    if span >= 60:
        return f"{span / 60:.1f} min"
    return f"{span:.0f} s"


def _gpu_info(engine: Engine, server_id: int, cards: list[int] | None = None) -> tuple[str, str]:
    """(GPU model, driver) of the server's own `cards` (its gpu_indices, else the cards its
    `gpu.*` samples name): the host's `gpu:info` lists every GPU of the host, and one server's
    scorecard must not name another server's GPU."""
    for key in (f"gpu:{server_id}:info", "gpu:info"):
        info = repo.load_state(engine, key=key)
        if not info:
            continue
        raw = info.get("gpus")
        gpus: list[Any] = raw if isinstance(raw, list) else [info]
        if cards:
            gpus = [g for g in gpus if isinstance(g, dict) and g.get("index", cards[0]) in cards]
        names = sorted({str(g.get("name")) for g in gpus if isinstance(g, dict) and g.get("name")})
        driver = info.get("driver") or next(
            (g.get("driver") for g in gpus if isinstance(g, dict) and g.get("driver")), None)
        return (", ".join(names) or "unknown"), str(driver or "unknown")
    return "unknown", "unknown"


def _pick_run(engine: Engine, server_id: int, *, launch_id: int | None, since: float,
              until: float) -> ProbeRun | None:
    for run in repo.list_probe_runs(engine, server_id=server_id, limit=200):
        if run.status != "done":
            continue
        if launch_id is not None:
            if run.launch_id == launch_id:
                return run
            continue
        start = run.started_at or run.created_at
        if since <= start < until:
            return run
    return None


def resolve_subject(
    engine: Engine,
    *,
    server: str | None = None,
    run_id: int | None = None,
    launch_id: int | None = None,
    since_s: float | None = None,
    now: float | None = None,
    use_probes: bool = True,
) -> tuple[Server, Launch | None, ProbeRun | None, float, float]:
    """(server, launch, probe run, since, until) of what a scorecard scores."""
    now = time.time() if now is None else now
    run: ProbeRun | None = None
    launch: Launch | None = None
    srv: Server | None = None
    if run_id is not None:
        run = repo.get_probe_run(engine, run_id=run_id)
        if run is None:
            raise ScorecardError(f"Probe run #{run_id} does not exist; the Compare page lists the finished runs.")
        if run.server_id is not None:
            srv = repo.get_server(engine, id=run.server_id)
        if server is not None and (srv is None or srv.name != server):
            raise ScorecardError(f"Probe run #{run_id} was not run against server {server!r}.")
        since = run.started_at or run.created_at
        until = run.finished_at or now
        if run.launch_id is not None:
            launch = repo.get_launch(engine, launch_id=run.launch_id)
    elif launch_id is not None:
        launch = repo.get_launch(engine, launch_id=launch_id)
        if launch is None:
            raise ScorecardError(f"No launch has id {launch_id}; the Compare page lists the launches.")
        srv = repo.get_server(engine, id=launch.server_id)
        if server is not None and (srv is None or srv.name != server):
            raise ScorecardError(f"Launch id {launch_id} is not a launch of server {server!r}.")
        since, until = launch.started_at, launch.ended_at or now
    else:
        if server is None:
            raise ScorecardError("Name a server (and a run, a launch or a window) to score.")
        srv = repo.get_server(engine, name=server)
        since, until = now - (since_s or 3600.0), now
    if srv is None:
        raise ScorecardError(f"Server {server!r} is not known; add it to pitwall.toml.")
    assert srv.id is not None
    if launch is None and run_id is None:
        launch = repo.latest_launch(engine, server_id=srv.id)
        if launch is not None and (launch.ended_at or now) < since:
            launch = None
    if run is None and use_probes:
        run = _pick_run(engine, srv.id, launch_id=launch_id, since=since, until=until)
    return srv, launch, run, since, until


def _probe_parts(engine: Engine, run: ProbeRun | None) -> tuple[
        Any, dict[str, Any], int, str, dict[str, Any] | None]:
    """(requests, fingerprint detail, images per request, load mode, self-check) of a run."""
    reqs = repo.probe_requests(engine, run_id=run.id) if run is not None and run.id else None
    detail, images_per_request, mode = probe_detail(run)
    levels = SweepReport.of(run.report if run is not None else None).levels
    checks = [sc for lv in levels if (sc := lv.self_check) is not None and sc.to_dict()]
    self_check: dict[str, Any] | None = None
    if checks:
        lags = [c.loop_lag_p99_s for c in checks if c.loop_lag_p99_s is not None]
        cpus = [c.client_cpu_pct for c in checks if c.client_cpu_pct is not None]
        self_check = {
            "loop_lag_p99_s": max(lags) if lags else None,
            "client_cpu_pct": max(cpus) if cpus else None,
            "trusted": all(bool(c.trusted) for c in checks),
            "levels": [c.to_dict() for c in checks],
            # the run's one note in plain words (which levels, lag against its bound), the same
            # sentence Benchmarks and `pitwall probe` print
            "note": run_note(levels),
        }
    elif run is not None:
        self_check = {"trusted": run.trusted}

    return reqs, detail, images_per_request, mode, self_check


def run_only_inputs(engine: Engine, run: ProbeRun, *, now: float | None = None) -> ScorecardInputs:
    """The inputs of a probe run attached to no server (`pitwall probe --url ...` against an
    address no configured server has): its own requests only; every server-side figure is
    absent and says why."""
    reqs, detail, images_per_request, mode, self_check = _probe_parts(engine, run)
    since = run.started_at or run.created_at
    until = run.finished_at or (time.time() if now is None else now)
    why = ("absent: the run is attached to no server (its address matched no configured "
           "server), so there are no server-side samples")
    url = redact_url(run.url)
    kind = "image" if run.api == "images" else "llm"
    subject: dict[str, Any] = {
        "server": f"no server ({url})", "server_kind": kind,
        "base_url": url, "launch_id": None, "profile_name": None, "profile_hash": None,
        "run_id": run.id, "run_name": run.name, "since": since, "until": until,
        "window_label": _window_label(since, until), "resolution": "raw",
        "series_resolution": {}, "no_server": True,
    }
    provenance: dict[str, Any] = {
        "pitwall_version": __version__, ENGINE_VERSION_FIELD: "unknown", "server_args": {},
        "argv": [], "env": {}, "gpu_model": "unknown", "gpu_driver": "unknown", "gpu_count": 1,
        "fingerprint": run.fingerprint, "fingerprint_detail": redact_obj(detail) or None,
        "workload_spec": redact_obj(run.spec) if run.spec is not None else None,
        "self_check": self_check, "output_check": output_check(run), "generated_at": time.time(),
    }
    return ScorecardInputs(
        subject=subject, provenance=provenance, kind=kind,
        gpu_count_note="no server", probe_requests=reqs, probe_mode=mode,
        images_per_request=images_per_request, image_steps=(detail.get("image") or {}).get("steps"),
        unavailable={s.key: why for s in METRIC_SPECS})


def _energy_and_power(reads: WindowReads, cards: list[int], log_spans: list[tuple[float, float]] | None
                      ) -> tuple[float | None, float | None]:
    """Energy (J, the cards' counter increase, within `log_spans` when given) and power (W, the
    sum of each card's mean) over the window; None where no card says."""
    energy: float | None = None
    power: float | None = None
    for i in cards:
        e_ts, e = reads.points(sk.gpu_key(i, "energy_j"), "energy_j_per_output_tok", "energy_j_per_image",
                               "electricity_usd_per_1m_output_tok")
        d = sm.counter_increase(e) if log_spans is None else sm.counter_increase_within(e_ts, e, log_spans)
        if d is not None:
            energy = (energy or 0.0) + d
        pw = reads.window_mean(sk.gpu_key(i, "power_w"))
        if pw is not None:
            power = (power or 0.0) + pw
    if reads.unavailable.keys() & {"energy_j_per_output_tok"}:
        energy = None  # a counter delta over part of the window is not the window's
    return energy, power


def _subject(engine: Engine, srv: Server, launch: Launch | None, run: ProbeRun | None,
             since: float, until: float, reads: WindowReads) -> dict[str, Any]:
    """What the scorecard is of: server, launch, profile, probe run, window and its resolution."""
    return {
        "server": srv.name,
        "server_kind": srv.kind,
        "engine": srv.engine,
        "base_url": redact_url(srv.base_url),
        "launch_id": launch.id if launch else None,
        "launch_number": repo.launch_numbers(engine, [launch.id]).get(launch.id) if launch and launch.id else None,
        "profile_name": (launch.profile_name if launch else None) or srv.profile,
        "profile_hash": launch.profile_hash if launch else None,
        "run_id": run.id if run else None,
        "run_name": run.name if run else None,
        "since": since,
        "until": until,
        "window_label": _window_label(since, until),
        "resolution": reads.window_resolution(),
        "series_resolution": dict(sorted(reads.resolution.items())),
    }


def output_check(run: ProbeRun | None) -> dict[str, Any] | None:
    """The run's output-consistency check against its baseline run (collectors/probe/
    consistency.py: requests and prompts compared and differing, warnings), None without one."""
    got = SweepReport.of(run.report if run is not None else None).consistency
    return dict(got) if isinstance(got, dict) else None


def _provenance(launch: Launch | None, run: ProbeRun | None, detail: dict[str, Any],
                self_check: dict[str, Any] | None, gpu_model: str, gpu_driver: str,
                n_gpu: int) -> dict[str, Any]:
    """Where the figures come from: versions, the launch's args (redacted), GPUs, the workload."""
    return {
        "pitwall_version": __version__,
        ENGINE_VERSION_FIELD: (launch.engine_version if launch else None) or "unknown",
        "server_args": redact_obj((launch.server_args if launch else None) or {}),
        "argv": redact_argv((launch.argv if launch else None) or []),
        "env": redact_obj((launch.env if launch else None) or {}),
        "gpu_model": gpu_model,
        "gpu_driver": gpu_driver,
        "gpu_count": n_gpu,
        "fingerprint": run.fingerprint if run else None,
        "fingerprint_detail": redact_obj(detail) or None,
        "workload_spec": redact_obj(run.spec) if run and run.spec is not None else None,
        "self_check": self_check,
        "output_check": output_check(run),
        "generated_at": time.time(),
    }


def gather_inputs(
    engine: Engine,
    *,
    srv: Server,
    launch: Launch | None,
    run: ProbeRun | None,
    since: float,
    until: float,
    electricity_usd_per_kwh: float | None = None,
    level: float | None = None,
    retention: dict[str, Any] | None = None,
    now: float | None = None,
) -> ScorecardInputs:
    """Everything the scorecard of [since, until) is computed from. Series are read raw where
    the samples are kept and from rollups where `retention` (settings `retention.*_days`; None:
    what is stored decides) has removed them: window_reads.py says which figures that leaves
    unavailable, and the subject names the resolution per series and for the window."""
    assert srv.id is not None
    sid = srv.id
    reqs, detail, _, _, self_check = _probe_parts(engine, run)
    reads = WindowReads(engine, server_id=sid, since=since, until=until, retention=retention, now=now)
    gpu_metrics = repo.series_names(engine, server_id=sid, prefix="gpu.")
    seen = sorted({key[0] for k in gpu_metrics if (key := parse_key(k))})  # cards, each once
    mem_total = repo.latest_samples(engine, server_id=sid, metrics=[
        k for k in gpu_metrics if k.endswith(".mem_total_bytes")])
    got: dict[str, float | None] = {}

    def subject(log_spans: list[tuple[float, float]] | None) -> dict[str, Any]:
        """Energy over the spans the tokens were counted over; then the subject, whose
        resolution names every series read so far."""
        got["energy"], got["power"] = _energy_and_power(reads, seen, log_spans)
        return _subject(engine, srv, launch, run, since, until, reads)

    inputs = gather_window(
        reads, srv=srv, launch=launch, run=run, requests=reqs, gpus_seen=seen, since=since,
        until=until, subject=subject, provenance={}, electricity_usd_per_kwh=electricity_usd_per_kwh,
        level=level, event_counts=repo.count_events(engine, server_id=sid, since=since, until=until))
    events_df = repo.list_events(engine, server_id=sid, since=since, until=until, limit=EVENT_LIMIT)
    series_df = repo.bucketed_series(engine, server_id=sid, metrics=SERIES_KEYS, since=since,
                                     until=until, max_points=SERIES_POINTS)
    gpu_model, gpu_driver = _gpu_info(engine, sid, list(srv.gpu_indices or seen))
    inputs.provenance = _provenance(launch, run, detail, self_check, gpu_model, gpu_driver, inputs.gpu_count)
    inputs.energy_j = got["energy"]
    inputs.power_w_sum_of_means = got["power"]
    inputs.unavailable = dict(reads.unavailable)
    inputs.events = [
        {"ts": float(r.ts), "kind": r.kind, "severity": r.severity,
         "message": redact_text(r.message) if isinstance(r.message, str) else r.message}
        for r in events_df.itertuples()
    ]
    inputs.series = [
        {"metric": r.metric, "ts": float(r.ts), "value": float(r.avg)}
        for r in series_df.itertuples()
    ]
    inputs.gpu_mem_total_bytes = card_mem_total({k: v for k, (_, v) in mem_total.items()})
    # raw GPM samples only: a window older than retention.samples_days has no verdict
    inputs.gpu_walls = gpu_walls(engine, server_id=sid, since=since, until=until)
    inputs.stage_walls = (stage_walls(engine, server_id=sid, since=since, until=until, engine_name=srv.engine)
                          if srv.kind == "image" else {})
    return inputs


def build_scorecard(
    engine: Engine,
    *,
    server: str | None = None,
    run_id: int | None = None,
    launch_id: int | None = None,
    since_s: float | None = None,
    settings_slo: dict[str, Any] | None = None,
    electricity_usd_per_kwh: float | None = None,
    level: float | None = None,
    now: float | None = None,
    use_probes: bool = True,
    retention: dict[str, Any] | None = None,
) -> Scorecard:
    """The scorecard of a probe run, a launch, or the last `since_s` seconds of a server.

    Raises ScorecardError (unknown subject) or slo.SloError (bad [slo] table), both one sentence.
    """
    orphan = repo.get_probe_run(engine, run_id=run_id) if run_id is not None and server is None else None
    if orphan is not None and orphan.server_id is None:  # `pitwall probe` against no known server
        slo_set = slo_mod.resolve(None, settings_slo, slo_mod.load_overrides(engine))
        inputs = run_only_inputs(engine, orphan, now=now)
        inputs.level = level
    else:
        srv, launch, run, since, until = resolve_subject(
            engine, server=server, run_id=run_id, launch_id=launch_id, since_s=since_s, now=now,
            use_probes=use_probes)
        slo_set = slo_mod.resolve(srv.name, settings_slo, slo_mod.load_overrides(engine))
        inputs = gather_inputs(engine, srv=srv, launch=launch, run=run, since=since, until=until,
                               electricity_usd_per_kwh=electricity_usd_per_kwh, level=level,
                               retention=retention, now=now)
    try:
        card = compute_scorecard(inputs, slo_set)
    except ValueError as exc:  # an unknown headline level
        raise ScorecardError(f"Cannot score: {exc}.") from None
    definitions.label(card)
    return card
