"""`/metrics` of the diffusion server: every `sglang:diffusion_*` series, built with prometheus_client
under the names, labels and buckets of SGLang's runtime/observability/metrics.py, read by the
collector's pure `compute` over two scrapes."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from collectors.sglang.metrics import absent_keys, compute, parse_metrics

LAT = (0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200)
STAGE = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 1200)
L = ("monolithic", "tcp://127.0.0.1:5555")  # role, replica


class Diffusion:
    """The metric families of SGLang's DiffusionMetrics, on a private registry."""

    def __init__(self) -> None:
        r = self.reg = CollectorRegistry()
        lb = ("role", "replica")
        self.queue = Gauge("sglang:diffusion_num_queue_reqs", "q", lb, registry=r)
        self.running = Gauge("sglang:diffusion_num_running_reqs", "r", lb, registry=r)
        self.requests = Counter("sglang:diffusion_requests_total", "n",
                                lb + ("status", "is_warmup"), registry=r)
        self.latency = Histogram("sglang:diffusion_request_latency_seconds", "l",
                                 lb + ("status", "is_warmup"), buckets=LAT, registry=r)
        self.queue_time = Histogram("sglang:diffusion_queue_time_seconds", "q",
                                    lb + ("is_warmup",), buckets=LAT, registry=r)
        self.batch = Histogram("sglang:diffusion_generation_batch_size", "b",
                               lb + ("stop_reason",), buckets=(1, 2, 4, 8, 16, 32, 64), registry=r)
        self.stage = Histogram("sglang:diffusion_stage_host_latency_seconds", "s",
                               lb + ("stage",), buckets=STAGE, registry=r)
        self.lora = Gauge("sglang:diffusion_lora_loaded_adapters", "a", lb, registry=r)
        self.lora_modules = Gauge("sglang:diffusion_lora_active_modules", "m", lb, registry=r)
        self.lora_adapters = Gauge("sglang:diffusion_lora_active_adapters", "a", lb, registry=r)
        self.lora_module = Gauge("sglang:diffusion_lora_module_active", "x", lb + ("module",),
                                 registry=r)

    def text(self) -> str:
        return generate_latest(self.reg).decode()

    def request(self, seconds: float, *, warmup: bool = False, error: bool = False) -> None:
        w = str(warmup).lower()
        self.requests.labels(*L, "error" if error else "success", w).inc()
        self.latency.labels(*L, "error" if error else "success", w).observe(seconds)
        self.queue_time.labels(*L, w).observe(0.2)


def test_every_diffusion_series() -> None:
    m = Diffusion()
    # before the baseline scrape: the warm-up and one of each series (a series seen for the
    # first time is its own baseline, as in Prometheus rate())
    m.request(100.0, warmup=True)
    m.request(10.0)
    m.request(1.0, error=True)
    m.batch.labels(*L, "max_batch").observe(1)
    m.batch.labels(*L, "unspecified").observe(1)
    for stage in ("DenoisingStep", "DenoisingStage", "DecodingStage"):
        m.stage.labels(*L, stage).observe(0.001)
    m.lora_module.labels(*L, "transformer").set(0)
    m.lora_modules.labels(*L).set(0)  # SGLang publishes the LoRA gauges at startup
    m.lora_adapters.labels(*L).set(0)
    first = parse_metrics(m.text())
    assert not first.errors
    _, state = compute(first, None, 1000.0)

    # window of 10 s: 4 user requests (one failed), 1 more warm-up, 2 batches, 50 steps
    for s in (20.0, 22.0, 24.0):
        m.request(s)
    m.request(3.0, error=True)
    m.request(500.0, warmup=True)  # must not move the user latency or rate
    m.batch.labels(*L, "max_batch").observe(2)
    m.batch.labels(*L, "unspecified").observe(1)
    for _ in range(50):
        m.stage.labels(*L, "DenoisingStep").observe(0.44)  # 0.1 < 0.44 <= 0.5
    for _ in range(4):
        m.stage.labels(*L, "DenoisingStage").observe(22.0)  # 10 < 22 <= 30
        m.stage.labels(*L, "DecodingStage").observe(0.007)  # 0.005 < x <= 0.01
    m.queue.labels(*L).set(3)
    m.running.labels(*L).set(1)
    m.lora.labels(*L).set(2)
    m.lora_modules.labels(*L).set(1)
    m.lora_adapters.labels(*L).set(1)
    m.lora_module.labels(*L, "transformer").set(1)
    m.lora_module.labels(*L, "transformer_2").set(0)
    v, _ = compute(parse_metrics(m.text()), state, 1010.0)

    assert v["metrics.diffusion_num_queue_reqs"] == 3
    assert v["metrics.diffusion_num_running_reqs"] == 1
    assert v["metrics.diffusion_lora_loaded_adapters"] == 2
    assert v["metrics.diffusion_lora_active_modules"] == 1
    assert v["metrics.diffusion_lora_active_adapters"] == 1
    assert v["metrics.diffusion_lora_module_active.transformer"] == 1
    assert v["metrics.diffusion_lora_module_active.transformer_2"] == 0
    assert v["metrics.diffusion_requests_per_s"] == 0.4  # 4 user requests / 10 s
    assert v["metrics.diffusion_failed_requests_per_s"] == 0.1
    assert v["metrics.diffusion_e2e_window_count"] == 4  # the 500 s warm-up is left out
    assert v["metrics.diffusion_e2e_mean_s"] == (20 + 22 + 24 + 3) / 4
    assert 20 <= v["metrics.diffusion_e2e_p50_s"] <= 30  # rank 2 of 4 lies in (20, 30]
    assert v["metrics.diffusion_e2e_p99_s"] <= 30 and v["metrics.diffusion_e2e_clamped"] == 0
    assert v["metrics.diffusion_queue_time_window_count"] == 4
    assert v["metrics.diffusion_batch_size_window_count"] == 2
    assert v["metrics.diffusion_batch_size_mean"] == 1.5
    assert "metrics.diffusion_batch_size_p50_s" not in v  # a count, not seconds
    assert v["metrics.diffusion_stage_window_count.DenoisingStep"] == 50
    assert 0.1 < v["metrics.diffusion_stage_p50_s.DenoisingStep"] <= 0.5
    assert abs(v["metrics.diffusion_stage_mean_s.DenoisingStep"] - 0.44) < 1e-9
    assert 10 < v["metrics.diffusion_stage_p99_s.DenoisingStage"] <= 30
    assert v["metrics.diffusion_stage_mean_s.DenoisingStage"] == 22.0
    assert 0.005 < v["metrics.diffusion_stage_p95_s.DecodingStage"] <= 0.01
    absent = absent_keys(parse_metrics(m.text()))
    assert not [k for k in absent if k.startswith("metrics.diffusion_")]
    assert "metrics.num_running_reqs" not in absent  # an image server is not judged by LLM keys


def test_llm_payload_has_no_diffusion_keys_and_none_listed_absent() -> None:
    text = "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 1.0\n"
    v, _ = compute(parse_metrics(text), None, 0.0)
    assert not [k for k in v if "diffusion" in k]
    absent = absent_keys(parse_metrics(text))
    assert "metrics.num_queue_reqs" in absent  # an LLM key this payload lacks is listed ...
    assert not [k for k in absent if "diffusion" in k]  # ... the image family is not
