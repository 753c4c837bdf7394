"""ScorecardInputs: everything a scorecard is computed from, as plain numbers and arrays, plus
the small helpers the dimension modules share (compute.py, cost_stability.py).

build.py fills it from storage; tests fill it by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from collectors.engines import DEFAULT_ENGINE
from scorecard import math as sm
from scorecard.model import MISSING, OK, Figure


@dataclass
class ScorecardInputs:
    subject: dict[str, Any]
    provenance: dict[str, Any]
    kind: str = "llm"  # llm | image
    engine: str = DEFAULT_ENGINE  # the server's engine (collectors/engines.py), named in figure notes
    gpu_hourly_usd: float | None = None
    gpu_count: int = 1
    gpu_count_note: str = ""
    electricity_usd_per_kwh: float | None = None
    probe_requests: pd.DataFrame | None = None  # every ProbeRequest row of the run
    probe_mode: str = "concurrency"
    images_per_request: int = 1
    level: float | None = None  # headline level; None = highest rps
    canary_ttft_s: np.ndarray = field(default_factory=lambda: np.empty(0))
    canary_e2e_s: np.ndarray = field(default_factory=lambda: np.empty(0))
    canary_ok: np.ndarray = field(default_factory=lambda: np.empty(0))
    #: (Σ canary.ok, count) when the window reaches into rollups (canary_ok is then empty)
    canary_ok_sum: tuple[float, int] | None = None
    server_hist: dict[str, np.ndarray] = field(default_factory=dict)  # "ttft_p99" -> values
    server_clamped: dict[str, bool | None] = field(default_factory=dict)  # "ttft" -> any clamp
    means: dict[str, float | None] = field(default_factory=dict)  # Sample key -> window mean
    prefill_cached_tokens: float | None = None  # Σ log.prefill_cached_token (None: no samples)
    #: tier (device, host, storage) -> Σ its hit tokens/s ÷ Σ prompt tokens/s over the window's
    #: scrapes (a tier's series exists from its first hit: a scrape before it counts 0)
    cache_tier_shares: dict[str, float] = field(default_factory=dict)
    prefill_new_tokens: float | None = None
    queue_ts: np.ndarray = field(default_factory=lambda: np.empty(0))
    queue_values: np.ndarray = field(default_factory=lambda: np.empty(0))
    queue_max: float | None = None  # max queue length (rollups keep it; queue_values may be empty)
    health_values: np.ndarray = field(default_factory=lambda: np.empty(0))
    energy_j: float | None = None  # Σ over GPUs of counter deltas over the window
    power_w_sum_of_means: float | None = None  # fallback when there is no energy counter
    window_output_tokens: float | None = None  # server-side tokens in the window (no probes)
    busy_s: float | None = None  # seconds energy_j and window_output_tokens cover when not the whole window
    event_counts: dict[str, int] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    series: list[dict[str, Any]] = field(default_factory=list)
    #: figure key -> why it has no value although its series has data (rollups only: window_reads)
    unavailable: dict[str, str] = field(default_factory=dict)
    # image servers (scorecard/image.py)
    image_steps: int | None = None  # the probe workload's num_inference_steps
    diffusion: dict[str, Any] = field(default_factory=dict)  # image.diffusion_inputs()
    gpu_mem_total_bytes: float | None = None  # Σ newest NVML mem_total_bytes of the GPUs
    # which wall the GPUs hit (scorecard/walls.py)
    gpu_walls: dict[str, Any] = field(default_factory=dict)  # gpu_wall.gpu_walls()
    stage_walls: dict[str, Any] = field(default_factory=dict)  # gpu_wall_stage.stage_walls()


def col_sum(rows: pd.DataFrame, col: str) -> float | None:
    """Σ of a numeric column, ignoring missing cells; None when every cell is missing."""
    vals = pd.to_numeric(rows[col], errors="coerce").dropna()
    return float(vals.sum()) if len(vals) else None


def hourly(inp: ScorecardInputs) -> float | None:
    """USD per hour of the whole server (one GPU-hour's price × GPU count); None: no price."""
    return sm.server_usd_per_hour(inp.gpu_hourly_usd, inp.gpu_count)


def put(figs: dict[str, Figure], key: str, value: float | None, source: str, note: str = "",
        *, status: str | None = None, flagged: bool = False) -> None:
    """Record one figure; a value is kept only with status ok (missing is None, never 0)."""
    st = status or (OK if value is not None else MISSING)
    figs[key] = Figure(key=key, value=value if st == OK else None, status=st, source=source,
                       note=note, flagged=flagged)


def measured_ok(inp: ScorecardInputs) -> pd.DataFrame | None:
    """Measured (non-warm-up) successful probe requests; None without a probe run."""
    df = inp.probe_requests
    if df is None or df.empty:
        return None
    return df[(~df["warmup"].astype(bool)) & df["ok"].astype(bool)]


def window_s(inp: ScorecardInputs) -> float | None:
    since, until = inp.subject.get("since"), inp.subject.get("until")
    if since is None or until is None:
        return None
    return sm.safe_div(float(until) - float(since), 1.0)
