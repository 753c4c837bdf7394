"""Regenerate simulator/sglang_0_5_23_metrics.json from the real server's /metrics capture.

The simulator declares exactly the metric families a real SGLang 0.5.23 server exposes (name,
type, HELP text, label names, histogram buckets, and the label values of the non-common labels
it showed), read from tests/fixtures/sglang-0.5.23-real-cpu-metrics.prom.

    .venv/bin/python bench/sim_metric_table.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "tests" / "fixtures" / "sglang-0.5.23-real-cpu-metrics.prom"
TARGET = REPO / "simulator" / "sglang_0_5_23_metrics.json"
COMMON = {"model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank", "le", "pid"}


def main() -> int:
    out = []
    for fam in text_string_to_metric_families(SOURCE.read_text()):
        labels: list[str] = []
        buckets: list[str] = []
        series: list[dict[str, str]] = []
        for s in fam.samples:
            for k in s.labels:
                if k not in labels and k != "le":
                    labels.append(k)
            if s.name.endswith("_bucket") and s.labels["le"] not in buckets:
                buckets.append(s.labels["le"])
            extra = {k: v for k, v in s.labels.items() if k not in COMMON}
            if extra and extra not in series:
                series.append(extra)
        out.append({"name": fam.name, "type": fam.type, "help": fam.documentation,
                    "labels": labels, "buckets": [float(b) for b in buckets if b != "+Inf"],
                    "series": series})
    TARGET.write_text(json.dumps({"_about": "Metric families of a real SGLang 0.5.23 server "
                                  "(bench/sim_metric_table.py)", "families": out}, indent=1))
    print(f"wrote {len(out)} families to {TARGET.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
