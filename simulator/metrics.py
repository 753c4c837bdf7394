"""Prometheus metrics in SGLang 0.5.23 names, types, labels and buckets (private registry).

LLM server: the 84 families a real 0.5.23 server exposed in a capture
(tests/fixtures/sglang-0.5.23-real-cpu-metrics.prom), declared from sglang_0_5_23_metrics.json:
scheduler-side families carry ``model_name, engine_type, tp_rank, pp_rank, moe_ep_rank``
(+ ``dp_rank`` when dp > 1); tokenizer-side ``model_name, engine_type`` plus ``is_streaming``
("true"/"false") where the real server has it, ``cache_source`` ("device") on
cached_tokens_total; HTTP families ``endpoint, method`` (+ ``status_code``). Counters are exposed
without ``_created`` samples, as SGLang's multiprocess registry does. Modelled (updated): running/
queue/usage/token gauges, cache hit rate, gen throughput, retraction gauge, new_token_ratio,
is_cuda_graph, memory/startup constants, token counters, TTFT/ITL/TPOT/e2e/queue-time and token
histograms, realtime_tokens, HTTP counters. The rest stay at their initial zero.

Diffusion server: ``role`` ("server") and ``replica`` ("0") labels.

Bucket lists are SGLang's defaults for 0.5.3-0.5.23; the middle of the queue-time list is not
pinned down and is filled here with 50..90 and 300..900 steps [inferred].
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

disable_created_metrics()

TTFT_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
ITL_BUCKETS = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040,
               0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1, 2, 4, 6, 8]
E2E_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600,
               1200, 1800, 2400]
QUEUE_BUCKETS = [0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40,
                 50, 60, 70, 80, 90, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200,
                 1400, 1600, 1800, 2000, 2500, 3000]
DIFFUSION_LATENCY_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200]
DIFFUSION_BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64]
DIFFUSION_STAGE_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 1200]

FAMILIES: list[dict[str, Any]] = json.loads(
    Path(__file__).with_name("sglang_0_5_23_metrics.json").read_text())["families"]
# Labels whose values this process fills in; any other label takes the values the real server
# showed (the table's "series"), e.g. is_streaming, phase, mode, cache_source.
COMMON = ("model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank", "pid", "dp_rank")
ON_DEMAND = {"endpoint", "method", "status_code"}  # created by the first matching request
OVERRIDE = {"sglang:time_to_first_token_seconds": "ttft", "sglang:inter_token_latency_seconds":
            "itl", "sglang:request_time_per_output_token_seconds": "itl",
            "sglang:e2e_request_latency_seconds": "e2e"}


#: families whose exported name changed between releases: 0.5.23 name -> (first release with it,
#: the name before). SGLang's srt/metrics/collector.py: the ITL histogram was
#: time_per_output_token_seconds until 0.4.3 (inter_token_latency_seconds came in 0.4.4, when
#: both were exported; the old one went in 0.4.5)
RENAMED: dict[str, tuple[tuple[int, ...], str]] = {
    "sglang:inter_token_latency_seconds": ((0, 4, 4), "sglang:time_per_output_token_seconds"),
}
OLDEST, NEWEST = (0, 3, 6), (0, 5, 23)


def version_tuple(text: str) -> tuple[int, ...] | None:
    """`0.4.3` (or `0.4.9.post2`) -> (0, 4, 3); None outside 0.3.6-0.5.23 or not a version."""
    parts = text.strip().split(".")
    if len(parts) < 3 or not all(p.isdigit() for p in parts[:3]) or (
            len(parts) > 3 and not (len(parts) == 4 and parts[3].startswith("post") and parts[3][4:].isdigit())):
        return None
    v = tuple(int(p) for p in parts[:3])
    return v if OLDEST <= v <= NEWEST else None


def exported_name(name: str, version: str) -> str:
    """The name a release exports family `name` (a 0.5.23 name) under."""
    v = version_tuple(version) or NEWEST
    since, before = RENAMED.get(name, (OLDEST, name))
    return name if v >= since else before


class LlmMetrics:
    """Every family of a real 0.5.23 server (sglang_0_5_23_metrics.json, made from a real
    capture by bench/sim_metric_table.py): same names, types, HELP, label names and buckets.
    Families the simulator does not model keep their initial zero samples."""

    def __init__(self, *, model_name: str, dp_size: int, ttft_buckets: list[float] | None = None,
                 itl_buckets: list[float] | None = None,
                 e2e_buckets: list[float] | None = None, version: str = "0.5.23",
                 priority: bool = False, engine_type: str = "unified") -> None:
        self.engine_type = engine_type  # prefill | decode on a PD server
        self.registry = CollectorRegistry(auto_describe=True)
        self.model_name = model_name
        self.dp = dp_size > 1
        #: --enable-priority-scheduling: scheduler and tokenizer families (those labelled with
        #: engine_type) gain a `priority` label, "" unless a series says otherwise
        self.priority = priority
        self.known_priorities: dict[str, set[str]] = {}  # queue gauge -> priorities seen (SGLang keeps them)
        self.pid = str(os.getpid())
        custom = {"ttft": ttft_buckets, "itl": itl_buckets, "e2e": e2e_buckets}
        self.fam: dict[str, Any] = {}
        self.labels_of: dict[str, list[str]] = {}
        for f in FAMILIES:
            labels = list(f["labels"])
            if self.dp and "tp_rank" in labels:
                labels.append("dp_rank")
            if self.priority and "engine_type" in labels:
                labels.append("priority")
            name, kind = f["name"], f["type"]
            shown = exported_name(name, version)  # children are still found by the 0.5.23 name
            if kind == "counter":
                m: Any = Counter(shown, f["help"], labels, registry=self.registry)
            elif kind == "gauge":
                m = Gauge(shown, f["help"], labels, registry=self.registry)
            else:
                buckets = custom.get(OVERRIDE.get(name, "")) or f["buckets"]
                m = Histogram(shown, f["help"], labels, buckets=buckets, registry=self.registry)
            self.fam[name] = m
            self.labels_of[name] = labels
            if not labels or ON_DEMAND & set(labels):
                continue
            for dp in range(dp_size if self.dp else 1):
                for extra in f["series"] or [{}]:
                    m.labels(**self._fill(name, dp, extra))
        self.g = {n.removeprefix("sglang:"): m for n, m in self.fam.items()
                  if isinstance(m, Gauge)}

    def _fill(self, name: str, dp: int, extra: dict[str, str]) -> dict[str, str]:
        values = {"model_name": self.model_name, "engine_type": self.engine_type, "tp_rank": "0",
                  "pp_rank": "0", "moe_ep_rank": "0", "pid": self.pid, "dp_rank": str(dp), "priority": ""}
        return {k: extra.get(k, values.get(k, "")) for k in self.labels_of[name]}

    def child(self, name: str, dp: int = 0, /, **extra: str) -> Any:
        """The series of family ``name`` (``sglang:...``) for DP rank ``dp`` and extra labels."""
        if not self.labels_of[name]:
            return self.fam[name]
        return self.fam[name].labels(**self._fill(name, dp, extra))

    def lazy(self, name: str, kind: str, doc: str, labels: list[str], buckets: list[float] | tuple[float, ...] = ()) -> Any:
        """A family that SGLang's multiprocess registry shows from its first write (the radix
        cache's, HiCache's): created on first use with its 0.5.23 labels and buckets."""
        if name not in self.fam:
            if kind == "counter":
                m: Any = Counter(name, doc, labels, registry=self.registry)
            elif kind == "gauge":
                m = Gauge(name, doc, labels, registry=self.registry)
            else:
                m = Histogram(name, doc, labels, buckets=buckets, registry=self.registry)
            self.fam[name], self.labels_of[name] = m, labels
        return self.fam[name]

    def verify_calls(self, count: int, **extra: str) -> None:
        """spec_verify_calls_total (tokenizer side, 0.5.13+), which a multiprocess registry shows
        from its first increment: created then."""
        name = "sglang:spec_verify_calls"
        if name not in self.fam:
            labels = ["model_name", "engine_type", *(["priority"] if self.priority else [])]
            self.fam[name] = Counter(name, "Number of speculative decoding verification calls.", labels,
                                     registry=self.registry)
            self.labels_of[name] = labels
        self.child(name, **extra).inc(count)

    def set_queue(self, name: str, dp: int, total: int, priorities: list[int | None]) -> None:
        """A queue gauge as 0.5.23's _log_gauge_queue_count writes it: the total (under
        priority="" with priority scheduling), then one series per priority ever seen in it
        (a request with none counts under "None"), 0 for those not queued now."""
        self.child(name, dp).set(total)
        if not self.priority:
            return
        counts: dict[str, int] = {}
        for p in priorities:
            counts[str(p)] = counts.get(str(p), 0) + 1
        known = self.known_priorities.setdefault(f"{name}:{dp}", set())
        known.update(counts)
        for label in known:
            self.child(name, dp, priority=label).set(counts.get(label, 0))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class DiffusionMetrics:
    """SGLang 0.5.23's diffusion families (runtime/observability/metrics.py): names, labels
    (role, replica [+ status, is_warmup | is_warmup | stop_reason | stage]) and buckets as there.
    role is ``monolithic`` for ``sglang serve``; replica the scheduler endpoint. Per-step times go
    into the stage histogram as stage="DenoisingStep" (observe_stage on ``denoising_step_<i>``)."""

    def __init__(self, replica: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        base = ["role", "replica"]
        self.base = ("monolithic", replica)
        self.queue = Gauge("sglang:diffusion_num_queue_reqs", "Requests waiting for first dispatch.",
                           base, registry=r)
        self.running = Gauge("sglang:diffusion_num_running_reqs",
                             "Dispatched requests not yet completed.", base, registry=r)
        self.requests = Counter("sglang:diffusion_requests", "Completed original client requests.",
                                [*base, "status", "is_warmup"], registry=r)
        self.latency = Histogram(
            "sglang:diffusion_request_latency_seconds",
            "Time from scheduler acceptance to completion, excluding HTTP postprocessing.",
            [*base, "status", "is_warmup"], buckets=DIFFUSION_LATENCY_BUCKETS, registry=r)
        self.queue_time = Histogram("sglang:diffusion_queue_time_seconds", "Time until first dispatch.",
                                    [*base, "is_warmup"], buckets=DIFFUSION_LATENCY_BUCKETS,
                                    registry=r)
        self.batch_size = Histogram("sglang:diffusion_generation_batch_size",
                                    "Original requests per dispatched batch.", [*base, "stop_reason"],
                                    buckets=DIFFUSION_BATCH_BUCKETS, registry=r)
        self.stage = Histogram(
            "sglang:diffusion_stage_host_latency_seconds",
            "Host wall time around a pipeline stage; not synchronized GPU execution time.",
            [*base, "stage"], buckets=DIFFUSION_STAGE_BUCKETS, registry=r)
        for name, doc in (("loaded_adapters", "Loaded LoRA adapters."),
                          ("active_modules", "Modules with active LoRA adapters."),
                          ("active_adapters", "Unique active LoRA adapters.")):
            Gauge(f"sglang:diffusion_lora_{name}", doc, base, registry=r).labels(*self.base).set(0)
        # one series per module, created the first time a module has an active adapter
        self.lora_module = Gauge("sglang:diffusion_lora_module_active",
                                 "Whether a module has an active adapter.", [*base, "module"],
                                 registry=r)
        self.queue.labels(*self.base).set(0)
        self.running.labels(*self.base).set(0)

    def finish(self, seconds: float, *, error: bool, warmup: bool) -> None:
        labels = (*self.base, "error" if error else "success", str(warmup).lower())
        self.requests.labels(*labels).inc()
        self.latency.labels(*labels).observe(seconds)

    def observe_stage(self, name: str, seconds: float) -> None:
        self.stage.labels(*self.base, name).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
