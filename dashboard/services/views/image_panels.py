"""Chart series of the Server page for image servers: where a request's time goes, seconds per
denoising step, peak memory against the card, queue and batch.

Keys come from scorecard/image.py DIFFUSION_KEYS (the diffusion log parser's
and metrics collector's contract). Every frame has the columns of timeseries.read_series (ts,
label, value, min, max), values in base units:

| panel | unit | series |
|---|---|---|
| stages | s | `log.diffusion.stage_s.<Stage>` per time bucket (mean seconds per request of each stage; stacked, so a bar is one average request), labelled by stage name |
| step | s | `log.diffusion.step_s` (DenoisingStage average time per step) |
| memory | bytes | `log.diffusion.peak_mem_gb` × 2^30 ("peak per request") and the card: peak + `log.diffusion.remaining_mem_gb` (the server's own figure), else NVML `gpu.<i>.mem_total_bytes` |
| queue | count | `metrics.diffusion_num_queue_reqs`, `metrics.diffusion_num_running_reqs`, `metrics.diffusion_batch_size_mean` |

Cross-check a stage bar: `sqlite3 pitwall.db "select avg(value) from sample where server_id=N
and metric='log.diffusion.stage_s.DenoisingStage' and ts between A and B"`.
"""

from __future__ import annotations

import pandas as pd
from sqlalchemy.engine import Engine

from scorecard.image import DIFFUSION_KEYS, GIB
from storage import repo

COLUMNS = ["ts", "label", "value", "min", "max"]
IMAGE_PANELS = {
    "stages": ("Time per request by stage (stacked)", "s"),
    "step": ("Seconds per denoising step", "s"),
    "memory": ("Peak GPU memory against the card", "bytes"),
    "queue": ("Queue, running and batch", "count"),
}


#: the series whose first sample starts a young image server's window (requests and queue)
START_KEYS: tuple[str, ...] = tuple(DIFFUSION_KEYS[k] for k in ("step_log", "peak_log", "queue", "running"))


def labelled_frame(df: pd.DataFrame, labels: dict[str, str], scale: float = 1.0) -> pd.DataFrame:
    """The rows of a bucketed read (repo.bucketed_series) whose metric is in `labels`, as a chart
    frame (COLUMNS) labelled by `labels[metric]`, values × `scale`."""
    part = df[df["metric"].isin(list(labels))] if not df.empty else df
    if part.empty:
        return pd.DataFrame(columns=COLUMNS)
    return pd.DataFrame({
        "ts": part["ts"].to_numpy(dtype=float),
        "label": part["metric"].map(labels).to_numpy(),
        "value": part["avg"].to_numpy(dtype=float) * scale,
        "min": part["min"].to_numpy(dtype=float) * scale,
        "max": part["max"].to_numpy(dtype=float) * scale,
    })


def image_series(engine: Engine, *, server_id: int, since: float, until: float,
                 max_points: int = 300) -> dict[str, pd.DataFrame]:
    """{panel key: frame} of IMAGE_PANELS over [since, until), one bucketed read."""
    prefix = DIFFUSION_KEYS["stage_log"]
    stages = {m: m[len(prefix):] for m in repo.metric_names(engine, server_id=server_id,
                                                            prefix=prefix)}
    queue = {DIFFUSION_KEYS["queue"]: "queued", DIFFUSION_KEYS["running"]: "running",
             DIFFUSION_KEYS["batch"]: "batch size (mean)"}
    peak, rem = DIFFUSION_KEYS["peak_log"], DIFFUSION_KEYS["remaining_log"]
    gpu_total = [m for m in repo.metric_names(engine, server_id=server_id, prefix="gpu.")
                 if m.endswith(".mem_total_bytes")]
    wanted = [*stages, DIFFUSION_KEYS["step_log"], peak, rem, *queue, *gpu_total]
    df = repo.bucketed_series(engine, server_id=server_id, metrics=wanted, since=since,
                              until=until, max_points=max_points)
    memory = labelled_frame(df, {peak: "peak per request"}, GIB)
    card = _card_memory(df, peak, rem, gpu_total)
    return {
        "stages": labelled_frame(df, stages),
        "step": labelled_frame(df, {DIFFUSION_KEYS["step_log"]: "s / step"}),
        "memory": pd.concat([memory, card], ignore_index=True) if not card.empty else memory,
        "queue": labelled_frame(df, queue),
    }


def _card_memory(df: pd.DataFrame, peak: str, rem: str, gpu_total: list[str]) -> pd.DataFrame:
    """The card's memory per bucket: peak + remaining from the log (same buckets), else NVML."""
    if not df.empty:
        p = df[df["metric"] == peak].set_index("ts")["max"]
        r = df[df["metric"] == rem].set_index("ts")["min"]
        both = (p + r).dropna()
        if not both.empty:
            v = both.to_numpy(dtype=float) * GIB
            return pd.DataFrame({"ts": both.index.to_numpy(dtype=float), "label": "card memory",
                                 "value": v, "min": v, "max": v})
    nvml = labelled_frame(df, dict.fromkeys(gpu_total, "card memory (NVML)"))
    if nvml.empty:
        return nvml
    return nvml.groupby(["ts", "label"], as_index=False).sum()


def is_empty(frames: dict[str, pd.DataFrame]) -> bool:
    return all(f.empty for f in frames.values())
