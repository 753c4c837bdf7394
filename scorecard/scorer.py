"""The tune lane's scorer: the scorecard of one probe run (scorecard/build.py), cut down to the
four dimensions the ranking (runner/tune_rank.py) and `pitwall tune --json` use.

The runner cannot import the scorecards, so the CLI's runner assembly builds this callable and
injects it (runner/tunes.py `Tunes(..., scorer)`). A block holds a dimension's grade and the
figures of DIMENSION_FIGURES that were measured, in base units (seconds, tok/s, USD, counts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import Engine

#: figures of each dimension copied into a candidate's scorecard block (when measured)
DIMENSION_FIGURES: dict[str, tuple[str, ...]] = {
    "latency": ("ttft_p50_s", "ttft_p99_s", "itl_p50_s", "itl_p99_s", "e2e_p99_s", "image_p99_s"),
    "throughput": ("rps", "output_tok_s", "images_per_min", "radix_hit_rate", "avg_running_batch"),
    "cost": ("gpu_usd_per_hour", "usd_per_1m_output_tok", "usd_per_image", "usd_per_1m_output_tok_at_slo"),
    "stability": ("success_rate", "error_count", "oom_count", "retraction_count", "crash_count",
                  "queue_max", "queue_above_threshold_s"),
}


def make_scorer(engine: Engine, settings: Any) -> Callable[[int, str], dict[str, Any]]:
    """The runner's scorer: (probe run id, server name) -> {scorecard, slo, image}."""
    from scorecard.build import build_scorecard
    from scorecard.slo import load_overrides, resolve

    def score(run_id: int, server: str) -> dict[str, Any]:
        card = build_scorecard(engine, run_id=run_id, settings_slo=settings.slo,
                               electricity_usd_per_kwh=settings.electricity_usd_per_kwh,
                               retention=dict(settings.retention))
        blocks: dict[str, Any] = {}
        for dim, keys in DIMENSION_FIGURES.items():
            block: dict[str, Any] = {"grade": card.dimensions[dim].grade if dim in card.dimensions else "none"}
            for key in keys:
                fig = card.figures.get(key)
                if fig is not None and fig.value is not None:
                    block[key] = fig.value
            blocks[dim] = block
        slo_set = resolve(server, settings.slo, load_overrides(engine))
        image = card.value("images_per_min") is not None
        wanted = ("image_p99_s", "success_rate") if image else ("ttft_p99_s", "itl_p99_s", "success_rate")
        slo = {k: t.target for k, t in slo_set.targets.items() if k in wanted}
        return {"scorecard": blocks, "slo": slo, "image": image}

    return score
