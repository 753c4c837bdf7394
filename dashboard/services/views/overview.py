"""Overview: one card per server with status, grades, key figures, GPUs and latest events.

Status comes from the newest `api.health_ok` sample (written by the API collector every few
seconds) and the newest Launch row: `launching` while a managed launch is starting, `up` when
the last health check passed within STALE_S, `down` when it failed, `unknown` when there is no
recent health data (runner stopped, or nothing collected yet).

Key figures over the last FIGURE_WINDOW_S (base units; the page formats them):

| figure | unit | from |
|---|---|---|
| ttft_p99_s | s | p99 of `canary.ttft_s` samples in the window (the client's view; collectors/probe/stats.py percentiles) |
| output_tok_s | tok/s | mean of `log.gen_throughput_tok_s` (else `metrics.gen_throughput_tok_s`) |
| usd_per_mtok | USD / 1M output tokens | scorecard math's cost_figures: gpu_hourly_usd × configured GPUs (else 1) ÷ 3600 ÷ output_tok_s × 1e6; None without a price or throughput |
| success_rate | 0-1 | mean of `canary.ok` in the window |

Grades per dimension, and the four figures when it has them, come from the server's scorecard
(scorecard/grades.py, same window); a dimension it cannot grade reads "none"
("no grade yet"). For image servers the card shows the image figures instead (scorecard keys image_p50_s,
image_p99_s, images_per_min, usd_per_image, image_step_s, peak_mem_bytes, mem_headroom_bytes,
energy_j_per_image; queue and running from `metrics.diffusion_num_*`).
Cross-check TTFT: `sqlite3 pitwall.db "select value from sample where metric='canary.ttft_s'
and server_id=N order by ts desc limit 20"`.

Cards and the server detail are redacted (present/shown.py): the launch command,
server args, env, base URL and event excerpts reach the page without any secret.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from sqlalchemy.engine import Engine

from collectors.engines import display_name
from present import shown
from present.format import launch_label
from scorecard import math as sm
from scorecard import metric_specs as mk
from scorecard.gpu_entries import gpu_entries
from scorecard.grades import FIGURE_WINDOW_S as FIGURE_WINDOW_S  # the page names the window
from scorecard.grades import server_grades
from storage import repo
from storage import series_keys as sk
from storage.models import Server
from storage.series_keys import LOG_QUEUE_REQ as LOG_QUEUE_REQ  # the Overview page shows these
from storage.series_keys import LOG_RUNNING_REQ as LOG_RUNNING_REQ
from storage.series_keys import LOG_TOKEN_USAGE as LOG_TOKEN_USAGE
from storage.series_keys import METRICS_DIFFUSION_NUM_QUEUE_REQS as METRICS_DIFFUSION_NUM_QUEUE_REQS
from storage.series_keys import unit_of as unit_of

STALE_S = 60.0
KEY_FIGURES = (
    sk.API_HEALTH_OK,
    sk.API_HEALTH_LATENCY_S,
    sk.LOG_RUNNING_REQ,
    sk.LOG_QUEUE_REQ,
    sk.LOG_GEN_THROUGHPUT_TOK_S,
    sk.METRICS_GEN_THROUGHPUT_TOK_S,
    sk.LOG_TOKEN_USAGE,
    sk.CANARY_TTFT_S,
    sk.CANARY_E2E_S,
    sk.METRICS_DIFFUSION_NUM_QUEUE_REQS,
    sk.METRICS_DIFFUSION_NUM_RUNNING_REQS,
)


@dataclass
class GpuFigure:
    """One GPU entry's newest figures: a card, or a MIG instance (`mig_id`) of card `index`, which
    has its own memory and no power or temperature (those stay on the card; gpu_entries.py)."""

    index: int
    util_ratio: float | None
    mem_used_bytes: float | None
    mem_total_bytes: float | None
    power_w: float | None
    temp_c: float | None
    mig_id: int | None = None
    label: str = ""

    @property
    def mem_ratio(self) -> float | None:
        if self.mem_used_bytes is None or not self.mem_total_bytes:
            return None
        return self.mem_used_bytes / self.mem_total_bytes


@dataclass
class ServerCard:
    id: int
    name: str
    base_url: str
    kind: str
    managed: bool
    status: str
    profile: str | None
    engine_version: str | None
    engine_label: str  # the engine's display name, collectors/engines.py
    figures: dict[str, float] = field(default_factory=dict)
    key: dict[str, float | None] = field(default_factory=dict)
    key_sources: dict[str, str] = field(default_factory=dict)  # key figure -> SOURCE_LABELS key
    grades: dict[str, str] = field(default_factory=dict)  # dimension -> pass | warn | fail | none
    grade_reasons: dict[str, str] = field(default_factory=dict)
    no_target: tuple[str, ...] = ()  # dimensions with no target set ("no target set", not "no grade yet")
    gpus: list[GpuFigure] = field(default_factory=list)
    gpu_telemetry: bool = False
    events: pd.DataFrame | None = None
    last_seen: float | None = None
    started_at: float | None = None  # the current launch's start (epoch s): a young server's GPUs are awaited


#: where key_figures() reads each figure when the scorecard has none (fleet row keys: FLEET_ROW_FIGURES
#: names the scorecard figure that wins over it)
KEY_SOURCES = {mk.TTFT_P99_S: "canary", mk.SUCCESS_RATE: "canary", mk.OUTPUT_TOK_S: "server",
               mk.FLEET_USD_PER_MTOK: "server"}
#: an image server's card figures, straight from its scorecard (scorecard keys)
IMAGE_FIGURES = (mk.USD_PER_IMAGE, mk.IMAGES_PER_MIN, mk.IMAGE_P50_S, mk.IMAGE_P99_S, mk.IMAGE_STEP_S,
                 mk.PEAK_MEM_BYTES, mk.MEM_HEADROOM_BYTES, mk.ENERGY_J_PER_IMAGE)
#: the scorecard figures a card reads: those behind KEY_SOURCES, then IMAGE_FIGURES
CARD_FIGURES = (*(mk.FLEET_ROW_FIGURES[k] for k in KEY_SOURCES), *IMAGE_FIGURES)
#: a figure's source as the Overview names it
SOURCE_LABELS = {"probe": "sweep", "canary": "canary", "server": "server log / metrics", "gpu": "GPU telemetry",
                 "events": "events", "config": "config"}


def source_label(card: ServerCard, key: str) -> str:
    src = card.key_sources.get(key, "")
    return SOURCE_LABELS.get(src, src or "no source")


def _status(latest: dict[str, tuple[float, float]], launch: Any, now: float) -> str:
    health = latest.get(sk.API_HEALTH_OK)
    if launch is not None and launch.status == "starting" and launch.ended_at is None:
        return "launching"
    if health is None or now - health[0] > STALE_S:
        return "unknown"
    return "up" if health[1] >= 1 else "down"


def key_figures(engine: Engine, server: Server, now: float) -> dict[str, float | None]:
    assert server.id is not None
    since = now - FIGURE_WINDOW_S
    ttft = repo.sample_values(engine, server_id=server.id, metric=sk.CANARY_TTFT_S, since=since)
    ok_sum, ok_n = repo.sample_sum(engine, server_id=server.id, metric=sk.CANARY_OK, since=since)
    tok_sum, tok_n = repo.sample_sum(engine, server_id=server.id, metric=sk.LOG_GEN_THROUGHPUT_TOK_S, since=since)
    if tok_n == 0:
        tok_sum, tok_n = repo.sample_sum(
            engine, server_id=server.id, metric=sk.METRICS_GEN_THROUGHPUT_TOK_S, since=since
        )
    tok_s = tok_sum / tok_n if tok_n else None
    gpus = len(server.gpu_indices or []) or 1
    usd = sm.cost_figures(gpu_usd_per_hour=sm.server_usd_per_hour(server.gpu_hourly_usd, gpus),
                          output_tok_s=tok_s)[mk.USD_PER_1M_OUTPUT_TOK]
    return {
        mk.TTFT_P99_S: sm.percentiles(ttft)[99],
        mk.OUTPUT_TOK_S: tok_s,
        mk.FLEET_USD_PER_MTOK: usd,
        mk.SUCCESS_RATE: ok_sum / ok_n if ok_n else None,
    }


def gpu_figures(engine: Engine, server: Server) -> list[GpuFigure]:
    """Newest figures of the server's GPU entries (configured cards, else whatever is stored; a
    card in MIG mode, then one entry per instance: gpu_entries.py)."""
    assert server.id is not None
    out = []
    for e in gpu_entries(engine, server_id=server.id, configured=server.gpu_indices or None):
        keys = [e.key(f) for f in ("util_ratio", "mem_used_bytes", "mem_total_bytes", "power_w", "temp_c")]
        latest = repo.latest_samples(engine, server_id=server.id, metrics=keys, max_age_s=STALE_S * 5)
        if not latest:
            continue
        v = {k[len(e.prefix):]: val for k, (_, val) in latest.items()}
        out.append(GpuFigure(e.index, v.get("util_ratio"), v.get("mem_used_bytes"), v.get("mem_total_bytes"),
                             v.get("power_w"), v.get("temp_c"), e.mig_id, e.label))
    return out


def server_cards(engine: Engine, now: float | None = None, settings: Any = None,
                 names: Sequence[str] | None = None) -> list[ServerCard]:
    """One card per server (only `names` when given): a few dozen queries per server, so the
    Overview shows cards for a few servers and the fleet table (views/fleet.py) for many."""
    now = time.time() if now is None else now
    cards = []
    wanted = None if names is None else set(names)
    for s in repo.list_servers(engine):
        assert s.id is not None
        if wanted is not None and s.name not in wanted:
            continue
        latest = repo.latest_samples(engine, server_id=s.id, metrics=KEY_FIGURES, max_age_s=STALE_S * 5)
        launch = repo.latest_launch(engine, server_id=s.id)
        gpus = gpu_figures(engine, s)
        g, why, sc, sc_sources, unset = server_grades(engine, s, now, settings, CARD_FIGURES)
        key = key_figures(engine, s, now)
        key_sources = dict(KEY_SOURCES)
        # The scorecard's figures (probes when a sweep ran in the window, else canary) win, and
        # their labels say which: "sweep" only for sweep figures, "canary" only for canary ones.
        for ours in KEY_SOURCES:
            theirs = mk.FLEET_ROW_FIGURES[ours]
            if sc.get(theirs) is not None:
                key[ours] = sc[theirs]
                key_sources[ours] = sc_sources.get(theirs, key_sources.get(ours, ""))
        for k in IMAGE_FIGURES:
            key[k] = sc.get(k)
        cards.append(
            ServerCard(
                id=s.id,
                name=s.name,
                base_url=shown.server(s).base_url,
                kind=s.kind,
                managed=s.managed,
                status=_status(latest, launch, now),
                profile=(launch.profile_name if launch else None) or s.profile,
                engine_version=launch.engine_version if launch else None,
                engine_label=display_name(s.engine),
                figures={k: v for k, (_, v) in latest.items()},
                key=key,
                key_sources=key_sources,
                grades=g,
                grade_reasons=why,
                no_target=unset,
                gpus=gpus,
                gpu_telemetry=bool(gpus),
                events=shown.frame(repo.list_events(engine, server_id=s.id, limit=5)),
                last_seen=max((ts for ts, _ in latest.values()), default=None),
                started_at=launch.started_at if launch is not None else None,
            )
        )
    return cards


@dataclass
class ServerDetail:
    server: Server
    status: str
    launch: Any
    profile: str | None
    engine_version: str | None
    engine_label: str  # the engine's display name, collectors/engines.py
    server_args: dict[str, Any]
    argv: list[str]
    launch_name: str | None = None  # "demo launch 3" (format.launch_label), never the row id


def server_detail(engine: Engine, name: str, now: float | None = None) -> ServerDetail | None:
    """Status, current launch, engine version and server args of one server (Server page header)."""
    now = time.time() if now is None else now
    s = repo.get_server(engine, name=name)
    if s is None or s.id is None:
        return None
    latest = repo.latest_samples(engine, server_id=s.id, metrics=(sk.API_HEALTH_OK,), max_age_s=STALE_S * 5)
    launch = shown.launch(repo.latest_launch(engine, server_id=s.id))
    return ServerDetail(
        server=shown.server(s),
        status=_status(latest, launch, now),
        launch=launch,
        profile=(launch.profile_name if launch else None) or s.profile,
        engine_version=launch.engine_version if launch else None,
        engine_label=display_name(s.engine),
        server_args=dict(launch.server_args or {}) if launch else {},
        argv=list(launch.argv or []) if launch else [],
        launch_name=launch_label(s.name, repo.launch_numbers(engine, [launch.id]).get(launch.id))
        if launch is not None and launch.id is not None else None,
    )
