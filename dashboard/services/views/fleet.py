"""The Overview's fleet table: one row per server — status, host, model, profile, key figures,
firing alerts and SLO grades — read with a fixed number of queries whatever the fleet's size.

`fleet_rows(engine, now=..., settings=...)` is what the Overview calls (and bench/fleet.py
times). It reads every server's samples of the last FLEET_WINDOW_S in three queries
(storage/repo/fleet.py: raw points where a figure needs them, SQL aggregates where a mean, sum
or max is enough, newest values), the newest launches, the window's probe runs and their requests, event
counts, the GPUs seen and the SLO overrides in one query each, then grades each server with the
scorecard's own pure code (scorecard/compute.py) on those inputs. So a fleet row's figures and
grades are the server's scorecard over the same window, except what needs per-GPU series
(FLEET_UNREAD: power, energy and electricity, GPU memory headroom, the GPU-wall verdicts). Those
are not read here (the Server page and Compare have them): an SLO target on one of them is not
checked in the fleet view, and the row lists it in `unchecked`, so a grade never claims a
target it did not check.

Row keys (base units, None = missing): `status` (up/down/launching/unknown, as the cards),
`host` (Server.host: the runner host that owns it), `model` (the launch's server_args
model_path, else the profile's), `profile`, `output_tok_s`, `rps`, `ttft_p95_s` and
`ttft_p99_s` (probe run in the window, else canary), `queue` (newest queue length), `kv_usage`
(newest log.token_usage, 0-1), `cache_hit_rate` (radix_hit_rate), `usd_per_mtok` (USD per 1M
output tokens), `success_rate`, `alerts` (firing, silenced included), `grade_<dimension>` and
`grade` (the worst dimension grade; "none" when nothing is graded), `unchecked` (SLO target
keys in FLEET_UNREAD, not checked here). Cross-check one row with
`pitwall export --server NAME --since 15m --format md`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import numpy as np
import pandas as pd
from sqlalchemy.engine import Engine

from dashboard.services.alerts.views import alerts as alert_rows
from dashboard.services.views.overview import STALE_S
from scorecard import math as sm
from scorecard import metric_specs as mk
from scorecard import slo as slo_mod
from scorecard import walls
from scorecard.compute import ScorecardInputs, compute_scorecard
from scorecard.gather import DIFFUSION_PREFIXES, MEAN_KEYS, QUEUE_KEYS, gather_window
from scorecard.grades import FIGURE_WINDOW_S
from scorecard.inputs import measured_ok
from scorecard.metric_specs import DIMENSIONS, FLEET_ROW_FIGURES
from scorecard.model import Scorecard
from storage import repo
from storage import series_keys as sk
from storage.models import Launch, ProbeRun, Server

FLEET_WINDOW_S = FIGURE_WINDOW_S
SERVER_HIST_KEYS = tuple(sk.hist_key(n, f"p{p}") for n in ("ttft", "itl", "e2e") for p in (50, 95, 99))
#: series read sample by sample (percentiles, step functions, rate spans, newest value)
FLEET_METRICS = (*QUEUE_KEYS, sk.CANARY_TTFT_S, sk.CANARY_E2E_S, sk.CANARY_OK, sk.API_HEALTH_OK,
                 sk.LOG_GEN_THROUGHPUT_TOK_S)
#: series the fleet view only averages, sums or maxes: aggregated in SQL (far fewer rows)
AGG_METRICS = (*(k for k in MEAN_KEYS if k not in FLEET_METRICS), *SERVER_HIST_KEYS,
               sk.LOG_PREFILL_CACHED_TOKEN, sk.LOG_PREFILL_NEW_TOKEN,
               sk.hist_key("ttft", "clamped"), sk.hist_key("itl", "clamped"), sk.hist_key("e2e", "clamped"))
#: series of which the fleet view shows the newest value only
LATEST_METRICS = (sk.LOG_TOKEN_USAGE,)
#: scorecard figures that need per-GPU series the fleet reads do not fetch
FLEET_UNREAD = (mk.AVG_POWER_W, mk.ENERGY_J_PER_OUTPUT_TOK, mk.ENERGY_J_PER_IMAGE,
                mk.ELECTRICITY_USD_PER_1M_OUTPUT_TOK, mk.MEM_HEADROOM_BYTES, *walls.GPU_KEYS,
                *walls.STAGE_KEYS)
UNREAD_NOTE = "not read in the fleet view: see the server's scorecard"


@dataclass
class FleetRow:
    """One server of the fleet table (module docstring: the keys and their units)."""

    id: int
    name: str
    kind: str
    host: str | None
    model: str | None
    profile: str | None
    status: str
    figures: dict[str, float | None] = field(default_factory=dict)
    alerts: int = 0
    grades: dict[str, str] = field(default_factory=dict)
    grade: str = "none"
    unchecked: list[str] = field(default_factory=list)  # SLO targets in FLEET_UNREAD
    usd_per_hour: float | None = None  # price × GPUs (None: no gpu_hourly_usd)
    stability: dict[str, float | None] = field(default_factory=dict)  # error/oom/restart counts
    fingerprint: str | None = None  # the probe run's workload fingerprint (None: canary only)
    #: TTFT and e2e (s) of the measured, successful probe requests at the run's headline level,
    #: the level the row's latency is from (fleet scorecards pool them)
    requests: pd.DataFrame | None = None

    def as_dict(self) -> dict[str, Any]:
        """The row as the table and exports show it (no request rows)."""
        out: dict[str, Any] = {"server": self.name, "status": self.status, "host": self.host,
                               "model": self.model, "profile": self.profile, "kind": self.kind}
        out.update({k: self.figures.get(k) for k in FLEET_ROW_FIGURES})
        out["queue"] = self.figures.get("queue")
        out["kv_usage"] = self.figures.get("kv_usage")
        out["alerts"] = self.alerts
        out.update({f"grade_{d}": self.grades.get(d, "none") for d in DIMENSIONS})
        out["grade"] = self.grade
        out["unchecked"] = ", ".join(self.unchecked)
        return out


class _ServerSamples:
    """One server's slice of the fleet sample frame: scorecard/gather.py's SeriesReads, as
    scorecard/window_reads.py reads one server (SQL aggregates where the fleet read them, else
    the raw values)."""

    def __init__(self, frame: pd.DataFrame, aggs: dict[str, tuple[int, float, float]] | None = None,
                 latest: dict[str, tuple[float, float]] | None = None) -> None:
        self._by_metric = ({str(m): g for m, g in frame.groupby("metric", sort=False, observed=True)}
                           if len(frame) else {})
        self._aggs = aggs or {}
        self._latest = latest or {}
        #: the figures the fleet reads leave out, each with why
        self.unavailable: dict[str, str] = dict.fromkeys(FLEET_UNREAD, UNREAD_NOTE)

    def window_mean(self, metric: str) -> float | None:
        """Window mean: from the SQL aggregate, else from the raw values."""
        if metric in self._aggs:
            n, total, _ = self._aggs[metric]
            return total / n if n else None
        return sm.mean_or_none(self.values(metric))

    def total(self, metric: str) -> tuple[float, int]:
        """(Σ, count): from the SQL aggregate, else from the raw values."""
        if metric in self._aggs:
            n, total, _ = self._aggs[metric]
            return total, n
        vals = self.values(metric)
        return float(vals.sum()), int(vals.size)

    def maximum(self, metric: str) -> float | None:
        if metric in self._aggs:
            n, _, top = self._aggs[metric]
            return top if n else None
        vals = self.values(metric)
        return float(vals.max()) if vals.size else None

    def count(self, metric: str) -> int:
        return self._aggs[metric][0] if metric in self._aggs else int(self.values(metric).size)

    def names(self, prefixes: Sequence[str]) -> list[str]:
        return [n for n in self._by_metric if n.startswith(tuple(prefixes))]

    def values(self, metric: str, *figures: str) -> np.ndarray:
        g = self._by_metric.get(metric)
        return np.empty(0) if g is None else g["value"].to_numpy(dtype=float)

    def points(self, metric: str, *figures: str) -> tuple[np.ndarray, np.ndarray]:
        g = self._by_metric.get(metric)
        if g is None:
            return np.empty(0), np.empty(0)
        return g["ts"].to_numpy(dtype=float), g["value"].to_numpy(dtype=float)

    def latest(self, metric: str, since: float) -> tuple[float, float] | None:
        if metric in self._latest:
            newest = self._latest[metric]
            return newest if newest[0] >= since else None
        ts, vals = self.points(metric)
        if not ts.size or ts[-1] < since:
            return None
        return float(ts[-1]), float(vals[-1])


def _status(samples: _ServerSamples, launch: Launch | None, now: float) -> str:
    """As overview._status: launching, else up/down from a health check newer than STALE_S."""
    if launch is not None and launch.status == "starting" and launch.ended_at is None:
        return "launching"
    health = samples.latest(sk.API_HEALTH_OK, now - STALE_S)
    if health is None:
        return "unknown"
    return "up" if health[1] >= 1 else "down"


def _model(launch: Launch | None, profiles: dict[str, str]) -> str | None:
    args = (launch.server_args if launch else None) or {}
    path = args.get("model_path") or args.get("model")
    if path:
        return str(path)
    return profiles.get((launch.profile_name if launch else None) or "") or None


def _inputs(srv: Server, launch: Launch | None, run: ProbeRun | None, reqs: pd.DataFrame | None,
            s: _ServerSamples, events: dict[str, int], gpus_seen: Sequence[int], since: float,
            until: float, electricity: float | None) -> ScorecardInputs:
    """The scorecard inputs of one server from the fleet reads (scorecard/gather.py, the
    gatherer build.gather_inputs uses, without the per-GPU series, events list and chart series
    the fleet view does not show)."""
    return gather_window(
        s, srv=srv, launch=launch, run=run, requests=reqs, gpus_seen=gpus_seen, since=since,
        until=until, electricity_usd_per_kwh=electricity, event_counts=events,
        subject=lambda _spans: {"server": srv.name, "server_kind": srv.kind,
                                "run_id": run.id if run else None, "since": since, "until": until,
                                "resolution": "raw"},
        provenance={"fingerprint": run.fingerprint if run else None, "self_check": {
            "trusted": run.trusted} if run is not None else None})


def _row(srv: Server, card: Scorecard, inp: ScorecardInputs, *, launch: Launch | None,
         samples: _ServerSamples, profiles: dict[str, str], alerts: int, run: ProbeRun | None,
         now: float) -> FleetRow:
    assert srv.id is not None
    figures: dict[str, float | None] = {k: card.value(v) for k, v in FLEET_ROW_FIGURES.items()}
    queue = next((q for k in QUEUE_KEYS if (q := samples.latest(k, now - STALE_S * 5))), None)
    kv = samples.latest(sk.LOG_TOKEN_USAGE, now - STALE_S * 5)
    figures["queue"] = None if queue is None else queue[1]
    figures["kv_usage"] = None if kv is None else kv[1]
    grades = {d: (card.dimensions[d].grade or "none") if d in card.dimensions else "none"
              for d in DIMENSIONS}
    measured = measured_ok(inp)
    level = card.subject.get("level")
    if measured is not None:
        measured = measured.loc[measured["level"] == level, ["ttft_s", "e2e_s"]]
    unchecked = [k for k in FLEET_UNREAD if k in card.figures and card.figures[k].target is not None]
    return FleetRow(
        id=srv.id, name=srv.name, kind=srv.kind, host=srv.host, model=_model(launch, profiles),
        profile=(launch.profile_name if launch else None) or srv.profile,
        status=_status(samples, launch, now), figures=figures, alerts=alerts, grades=grades,
        grade=slo_mod.worst(list(grades.values())), unchecked=unchecked,
        usd_per_hour=card.value(mk.GPU_USD_PER_HOUR),
        stability={k: card.value(k) for k in (mk.ERROR_COUNT, mk.OOM_COUNT, mk.CRASH_COUNT,
                                               mk.RESTART_COUNT)},
        fingerprint=run.fingerprint if run is not None else None, requests=measured,
    )


def fleet_rows(engine: Engine, now: float | None = None, settings: Any = None) -> list[FleetRow]:
    """Every server's fleet row over the last FLEET_WINDOW_S, in name order (module docstring).

    Queries: a fixed fourteen whatever the number of servers. A server whose scorecard cannot be
    computed (a bad [slo] table) still gets its row, every grade "none"."""
    now = time.time() if now is None else now
    since = now - FLEET_WINDOW_S
    servers = repo.list_servers(engine)
    frame = repo.fleet_samples(engine, metrics=FLEET_METRICS, prefixes=DIFFUSION_PREFIXES,
                               since=since, until=now + 1)
    by_server = {int(sid): g for sid, g in frame.groupby("server_id", sort=False)} if len(frame) else {}
    aggs: dict[int, dict[str, tuple[int, float, float]]] = {}
    for (sid, metric), agg in repo.fleet_aggregates(engine, metrics=AGG_METRICS, since=since,
                                                    until=now + 1).items():
        aggs.setdefault(sid, {})[metric] = agg
    latest: dict[int, dict[str, tuple[float, float]]] = {}
    for (sid, metric), newest in repo.fleet_latest(engine, metrics=LATEST_METRICS,
                                                   since=now - STALE_S * 5).items():
        latest.setdefault(sid, {})[metric] = newest
    launches = repo.fleet_latest_launches(engine)
    runs = repo.fleet_done_runs(engine, since=since, until=now)
    reqs = repo.fleet_probe_requests(engine, run_ids=[r.id for r in runs.values() if r.id])
    reqs_by_run = {int(rid): g for rid, g in reqs.groupby("run_id", sort=False)} if len(reqs) else {}
    events = repo.fleet_event_counts(engine, since=since, until=now + 1)
    gpus = repo.fleet_gpu_indices(engine, since=since)
    profiles = {p.name: p.model_path for p in repo.list_profiles(engine)}
    overrides = slo_mod.load_overrides(engine)
    firing: dict[str, int] = {}
    for a in alert_rows(engine, open_only=True):
        if a["state"] == "firing":
            firing[a["server"]] = firing.get(a["server"], 0) + 1
    settings_slo = getattr(settings, "slo", None)
    electricity = getattr(settings, "electricity_usd_per_kwh", None)
    out = []
    for srv in sorted(servers, key=lambda x: x.name):
        assert srv.id is not None
        samples = _ServerSamples(by_server.get(srv.id, frame.iloc[0:0]), aggs.get(srv.id),
                                 latest.get(srv.id))
        launch, run = launches.get(srv.id), runs.get(srv.id)
        run_reqs = reqs_by_run.get(run.id) if run is not None and run.id else None
        inp = _inputs(srv, launch, run, run_reqs, samples, events.get(srv.id, {}),
                      gpus.get(srv.id, []), since, now, electricity)
        card = _score(inp, srv.name, settings_slo, overrides)
        out.append(_row(srv, card, inp, launch=launch, samples=samples, profiles=profiles,
                        alerts=firing.get(srv.name, 0), run=run, now=now))
    return out


def _score(inp: ScorecardInputs, name: str, settings_slo: Any, overrides: dict[str, Any]) -> Scorecard:
    try:
        return compute_scorecard(inp, slo_mod.resolve(name, settings_slo, overrides))
    except (ValueError, slo_mod.SloError) as exc:  # a bad [slo] table must not blank the fleet
        return Scorecard(subject=dict(inp.subject), provenance={}, figures={}, dimensions={},
                         notes=[f"no scorecard: {exc}"])


# ---------------------------------------------------------------------------------------------
# filters and the table frame


@dataclass
class FleetFilter:
    """The Overview's filters; empty means "all"."""

    hosts: Sequence[str] = ()
    models: Sequence[str] = ()
    profiles: Sequence[str] = ()
    statuses: Sequence[str] = ()
    search: str = ""

    def keep(self, row: FleetRow) -> bool:
        tests: list[tuple[Sequence[str], str | None]] = [
            (self.hosts, row.host), (self.models, row.model), (self.profiles, row.profile),
            (self.statuses, row.status)]
        if any(wanted and (have or NONE_LABEL) not in wanted for wanted, have in tests):
            return False
        return self.search.strip().lower() in row.name.lower()


NONE_LABEL = "(none)"


def filter_rows(rows: Sequence[FleetRow], flt: FleetFilter) -> list[FleetRow]:
    return [r for r in rows if flt.keep(r)]


def filter_options(rows: Sequence[FleetRow]) -> dict[str, list[str]]:
    """The values each filter offers (a missing host/model/profile is NONE_LABEL)."""
    def opts(get: Callable[[FleetRow], str | None]) -> list[str]:
        return sorted({get(r) or NONE_LABEL for r in rows})
    return {"hosts": opts(lambda r: r.host), "models": opts(lambda r: r.model),
            "profiles": opts(lambda r: r.profile), "statuses": opts(lambda r: r.status)}


def server_link(name: str) -> str:
    """The Server page of one server (a relative URL the table's link column opens)."""
    return "server?" + urlencode({"server": name})
