"""The Server page's "GPU wall" panel: which wall each GPU hits, its evidence, a small chart, and
for image servers the share of denoising time per wall with the what-if per card.

Read model only (the page caches it and draws it): `wall_panel()` returns

| key | what |
|---|---|
| walls | gpu_wall.gpu_walls(): per GPU the verdict, reason, means, shares and achieved bandwidth |
| cards | per GPU with GPM: {index, title, verdict, bound_by (words), reason, evidence: [(label, text, help)], shares_text} ready to print |
| series | chart frame (ts, label, value, min, max) of `gpu.<i>.gpm.dram_bw_util_ratio` and `gpu.<i>.gpm.tensor_any_ratio`, 0-1 |
| not_available | the sentence for GPUs with telemetry but no GPM ("not available on this GPU"), else None |
| stage | image servers: gpu_wall_stage.stage_walls() of DenoisingStage; None for LLM servers |

Cross-check a GPU's figures: `pitwall gpu-wall --server NAME --since 15m` prints the same verdict
from the same rows; live, `nvidia-smi dmon --gpm-metrics 10,5,2` reads DRAM, tensor and SM activity.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy.engine import Engine

from dashboard.services.format import fmt_value
from dashboard.services.gpu_wall import VERDICTS, gpu_walls
from dashboard.services.gpu_wall_stage import stage_walls
from dashboard.services.views.image_panels import labelled_frame
from storage import repo

NOT_AVAILABLE = "not available on this GPU"
GPM_SERIES = {"dram_bw_util_ratio": "DRAM bandwidth", "tensor_any_ratio": "tensor activity"}


def _pct(ratio: float | None) -> str:
    return NOT_AVAILABLE if ratio is None else fmt_value(ratio, "ratio")


def gpu_card(gpu: dict[str, Any]) -> dict[str, Any]:
    """One GPU's verdict and evidence as printable text (gpu_walls' per-GPU dict in)."""
    peak = gpu.get("peak_bw_bytes_s")
    achieved = gpu.get("achieved_bw_bytes_s")
    bw_text = (f"{fmt_value(achieved, 'bytes_s')} of {fmt_value(peak, 'bytes_s')}"
               if achieved is not None and peak else "unknown card: peak not in GPU_SPECS")
    shares = sorted(gpu["shares"].items(), key=lambda kv: VERDICTS.index(kv[0]))
    return {
        "index": gpu["index"],
        "title": f"GPU {gpu['index']}" + (f" ({gpu['name']})" if gpu.get("name") else ""),
        "verdict": gpu["verdict"],
        "bound_by": fmt_value(VERDICTS.index(gpu["verdict"]), "verdict"),
        "reason": gpu["reason"],
        "evidence": [
            ("DRAM bandwidth", _pct(gpu["dram_ratio"]), "mean GPM DRAM bandwidth utilisation"),
            ("Tensor activity", _pct(gpu["tensor_ratio"]), "mean GPM tensor-core activity (any precision)"),
            ("SM activity", _pct(gpu["sm_ratio"]), "mean GPM SM utilisation"),
            ("Achieved bandwidth", bw_text, "DRAM utilisation × the card's peak (GPU_SPECS)"),
        ],
        "shares_text": ", ".join(f"{v} {fmt_value(s, 'ratio')}" for v, s in shares)
                       + f" of {gpu['samples']} GPM samples",
    }


def wall_panel(engine: Engine, *, server_id: int, kind: str, since: float, until: float,
               max_points: int = 200) -> dict[str, Any]:
    """The panel's read model over [since, until) (module table)."""
    walls = gpu_walls(engine, server_id=server_id, since=since, until=until)
    labels = {f"gpu.{g['index']}.gpm.{key}": f"GPU {g['index']} {label}"
              for g in walls["gpus"] for key, label in GPM_SERIES.items()}
    df = repo.bucketed_series(engine, server_id=server_id, metrics=list(labels), since=since,
                              until=until, max_points=max_points) if labels else pd.DataFrame()
    missing = walls.get("missing") or []
    return {
        "walls": walls,
        "cards": [gpu_card(g) for g in walls["gpus"]],
        "series": labelled_frame(df, labels),
        "not_available": (f"GPU {', '.join(map(str, missing))}: DRAM bandwidth, tensor and SM "
                          f"activity {NOT_AVAILABLE} (GPM needs Hopper or newer; on a container host "
                          "point gpu.dcgm_url at a dcgm-exporter with profiling fields)")
                         if missing else None,
        "stage": stage_walls(engine, server_id=server_id, since=since, until=until)
                 if kind == "image" else None,
    }
