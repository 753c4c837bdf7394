"""A disaggregated service's scorecard: its prefill servers, decode servers and router as one thing.

Pure: the view (dashboard/services/views/service.py) hands each member's figures over the window
(the mean of each key's samples) and this joins them. What it says and from where:

| part | from |
|---|---|
| TTFT, client | the router's canary TTFT p99 (the client's view through the whole service), else none |
| TTFT split (mean a request) | prefill: waiting for the decode server's handshake (stage `prefill_bootstrap`), the queue (`queue_time_mean_s`), the forward (`prefill_forward`), the KV transfer (`kv_transfer_latency_mean_s`, else the stage `prefill_transfer_kv_cache`); decode: its admission once the KV arrived (`decode_waiting` + `fake_output`: the first token is the one the prefill server sampled). What the parts leave of the decode server's own TTFT mean is `other` (routing, the decode side's own handshake) |
| KV transfer | latency p50/p95/p99, speed p50, size mean (prefill side; the older gauge's last value when no histogram) |
| ITL | the decode servers' ITL p99 (the worst member) |
| throughput | decode generation tok/s (summed), router requests/s |
| stability | transfer and handshake failures/s (each counted on both sides: the larger side's count, prefill or decode; 0 while transfers ran and no member exports a failure counter, which the engine creates at the first failure), router errors/s, breakers opened/s, workers the router calls unhealthy or open |
| cost | USD per 1M output tokens: every member's GPU-hours (GPUs x price; a prefill or decode server without gpu_indices counts one GPU, a router none) over the decode servers' output; none while a member with GPUs has no price |

A part no member measured is None: the card says "not measured", never 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from storage import series_keys as sk

STAGE = sk.hist_key("stage_latency", "mean") + "."
ROLES = ("router", "prefill", "decode")
#: what the card reads of each member (the router's per-worker keys besides: ROUTER_WORKER_PREFIXES)
MEMBER_KEYS: tuple[str, ...] = (
    STAGE + "prefill_bootstrap", STAGE + "prefill_forward", STAGE + "prefill_transfer_kv_cache",
    STAGE + "decode_waiting", STAGE + "decode_transferred", STAGE + "fake_output",
    sk.hist_key("queue_time", "mean"), sk.hist_key("kv_transfer_latency", "mean"),
    sk.hist_key("kv_transfer_latency", "p50"), sk.hist_key("kv_transfer_latency", "p95"),
    sk.hist_key("kv_transfer_latency", "p99"), sk.hist_key("kv_transfer_speed", "p50"),
    sk.hist_key("kv_transfer_size", "mean"), sk.METRICS_KV_TRANSFER_LAST_S,
    sk.hist_key("ttft", "mean"), sk.hist_key("itl", "mean"), sk.hist_key("itl", "p99"),
    sk.METRICS_GENERATION_TOKENS_PER_S, sk.METRICS_TRANSFER_FAILED_PER_S, sk.METRICS_BOOTSTRAP_FAILED_PER_S,
    sk.METRICS_ROUTER_REQUESTS_PER_S, sk.METRICS_ROUTER_ERRORS_PER_S, sk.METRICS_ROUTER_CB_OPENS_PER_S,
    sk.METRICS_PD_BOOTSTRAP_QUEUE, sk.METRICS_PD_INFLIGHT_QUEUE, sk.METRICS_PD_PREALLOC_QUEUE,
    sk.METRICS_PD_TRANSFER_QUEUE,
)
ROUTER_WORKER_PREFIXES: tuple[str, ...] = tuple(sk.pattern_prefix(k) for k in (
    sk.METRICS_ROUTER_WORKER_HEALTH, sk.METRICS_ROUTER_WORKER_CB, sk.METRICS_ROUTER_WORKER_ACTIVE))


@dataclass(frozen=True)
class Member:
    """One server of the service and its figures over the window (key -> mean; absent: none)."""

    name: str
    role: str  # prefill | decode | router
    status: str  # up | down | launching | unknown
    gpus: int = 0
    gpu_hourly_usd: float | None = None
    values: Mapping[str, float] = field(default_factory=dict)
    client_ttft_p99_s: float | None = None  # the canary's, through this member
    base_url: str = ""
    findings: tuple[tuple[str, str], ...] = ()  # the Doctor's (title, evidence) on this member


@dataclass(frozen=True)
class Part:
    """One slice of the time to first token, mean seconds a request; None when not measured."""

    name: str
    role: str
    seconds: float | None
    source: str


@dataclass(frozen=True)
class ServiceCard:
    name: str
    members: tuple[Member, ...]
    ttft_parts: tuple[Part, ...]
    ttft_server_s: float | None  # the decode servers' own TTFT mean (what the parts add up toward)
    figures: dict[str, float | None]
    workers: tuple[tuple[str, float | None, float | None, float | None], ...]  # (url, health, breaker, in flight)
    missing_roles: tuple[str, ...]

    @property
    def transfer_share(self) -> float | None:
        """The KV transfer's share of the time to first token: of the decode servers' TTFT mean,
        or of the parts' sum where that is larger (the parts are measured on two servers, each
        over its own requests in the window: they need not add up to the decode side's mean)."""
        part = next((p for p in self.ttft_parts if p.name == "KV transfer"), None)
        if part is None or part.seconds is None or not self.ttft_server_s:
            return None
        known = sum(p.seconds for p in self.ttft_parts if p.seconds is not None and p.name != "other")
        return part.seconds / max(self.ttft_server_s, known)


def _mean(members: Sequence[Member], key: str) -> float | None:
    vals = [m.values[key] for m in members if key in m.values]
    return sum(vals) / len(vals) if vals else None


def _sum(members: Sequence[Member], key: str) -> float | None:
    vals = [m.values[key] for m in members if key in m.values]
    return sum(vals) if vals else None


def _worst(members: Sequence[Member], key: str) -> float | None:
    vals = [m.values[key] for m in members if key in m.values]
    return max(vals) if vals else None


def _first(*values: float | None) -> float | None:
    return next((v for v in values if v is not None), None)


def ttft_parts(prefill: Sequence[Member], decode: Sequence[Member]) -> tuple[Part, ...]:
    transfer, source = None, "prefill: no KV transfer figure"
    for key, words in ((sk.hist_key("kv_transfer_latency", "mean"), "prefill: kv_transfer_latency histogram"),
                       (STAGE + "prefill_transfer_kv_cache", "prefill: stage prefill_transfer_kv_cache"),
                       (sk.METRICS_KV_TRANSFER_LAST_S, "prefill: the last request's kv_transfer_latency gauge")):
        if (got := _mean(prefill, key)) is not None:
            transfer, source = got, words
            break
    admitted = None  # the prefill's token goes out once the request joins a decode batch
    wait, fake = _mean(decode, STAGE + "decode_waiting"), _mean(decode, STAGE + "fake_output")
    if wait is not None or fake is not None:
        admitted = (wait or 0.0) + (fake or 0.0)
    return (
        Part("handshake", "prefill", _mean(prefill, STAGE + "prefill_bootstrap"),
             "prefill: stage prefill_bootstrap (waiting for the decode server)"),
        Part("prefill queue", "prefill", _mean(prefill, sk.hist_key("queue_time", "mean")),
             "prefill: queue_time histogram"),
        Part("prefill forward", "prefill", _mean(prefill, STAGE + "prefill_forward"), "prefill: stage prefill_forward"),
        Part("KV transfer", "prefill", transfer, source),
        Part("decode admission", "decode", admitted, "decode: stages decode_waiting + fake_output (the first "
             "token is the prefill's)"),
    )


def service_card(name: str, members: Sequence[Member]) -> ServiceCard:
    by = {r: [m for m in members if m.role == r] for r in ROLES}
    prefill, decode, router = by["prefill"], by["decode"], by["router"]
    parts = ttft_parts(prefill, decode)
    server_ttft = _mean(decode, sk.hist_key("ttft", "mean"))
    known = sum(p.seconds for p in parts if p.seconds is not None)
    if server_ttft is not None and any(p.seconds is not None for p in parts):
        parts = (*parts, Part("other", "service", max(server_ttft - known, 0.0),
                              "the decode servers' TTFT mean less the parts above"))
    out_tok = _sum(decode, sk.METRICS_GENERATION_TOKENS_PER_S)
    gpu_members = [m for m in members if m.gpus]
    priced = bool(gpu_members) and all(m.gpu_hourly_usd is not None for m in gpu_members)
    usd_h = sum(m.gpus * (m.gpu_hourly_usd or 0.0) for m in gpu_members)
    usd_per_mtok = usd_h / 3600.0 / out_tok * 1e6 if priced and out_tok else None
    # both sides count a failed handshake or transfer: the larger side's count, not their sum
    fails = [max(vals) for key in (sk.METRICS_TRANSFER_FAILED_PER_S, sk.METRICS_BOOTSTRAP_FAILED_PER_S)
             if (vals := [v for v in (_sum(prefill, key), _sum(decode, key)) if v is not None])]
    if not fails and _mean(prefill, sk.hist_key("kv_transfer_latency", "mean")) is not None:
        fails = [0.0]  # transfers ran and no failure counter exists: the engine creates it at the first failure
    figures: dict[str, float | None] = {
        "client_ttft_p99_s": _first(*(m.client_ttft_p99_s for m in router)),
        "server_ttft_mean_s": server_ttft,
        "itl_p99_s": _worst(decode, sk.hist_key("itl", "p99")),
        "kv_transfer_p50_s": _worst(prefill, sk.hist_key("kv_transfer_latency", "p50")),
        "kv_transfer_p95_s": _worst(prefill, sk.hist_key("kv_transfer_latency", "p95")),
        "kv_transfer_p99_s": _worst(prefill, sk.hist_key("kv_transfer_latency", "p99")),
        "kv_transfer_speed_p50_bytes_s": _mean(prefill, sk.hist_key("kv_transfer_speed", "p50")),
        "kv_transfer_size_mean_bytes": _mean(prefill, sk.hist_key("kv_transfer_size", "mean")),
        "output_tok_s": out_tok,
        "router_requests_per_s": _sum(router, sk.METRICS_ROUTER_REQUESTS_PER_S),
        "transfer_failures_per_s": sum(fails) if fails else None,
        "router_errors_per_s": _sum(router, sk.METRICS_ROUTER_ERRORS_PER_S),
        "router_cb_opens_per_s": _sum(router, sk.METRICS_ROUTER_CB_OPENS_PER_S),
        "usd_per_mtok": usd_per_mtok,
        "gpus": float(sum(m.gpus for m in members)),
    }
    return ServiceCard(name, tuple(members), parts, server_ttft, figures, _workers(router),
                       tuple(r for r in ("prefill", "decode") if not by[r]))


def _workers(router: Sequence[Member]) -> tuple[tuple[str, float | None, float | None, float | None], ...]:
    """The workers the router names (its per-worker health, breaker and in-flight keys)."""
    health = sk.pattern_prefix(sk.METRICS_ROUTER_WORKER_HEALTH)
    cb = sk.pattern_prefix(sk.METRICS_ROUTER_WORKER_CB)
    active = sk.pattern_prefix(sk.METRICS_ROUTER_WORKER_ACTIVE)
    urls = sorted({k[len(p):] for m in router for k in m.values for p in (health, cb, active) if k.startswith(p)})
    return tuple((u, _mean(router, health + u), _mean(router, cb + u), _sum(router, active + u)) for u in urls)


def worker_member(card: ServiceCard, url: str) -> Member | None:
    """The service member a router worker URL is (its base_url), None for a worker the
    configuration does not list."""
    return next((m for m in card.members if m.base_url and m.base_url.rstrip("/") == url.rstrip("/")), None)


def removed(health: float | None, breaker: float | None) -> bool:
    """A router that keeps a removed worker's series sets its health and breaker to -1 (the engine's router does)."""
    return (health is not None and health < 0) or (breaker is not None and breaker < 0)


def unhealthy_workers(card: ServiceCard) -> list[str]:
    """Workers the router calls unhealthy or whose breaker is open (or half open); a removed
    worker is neither."""
    return [u for u, h, c, _ in card.workers
            if not removed(h, c) and ((h is not None and h < 1) or (c is not None and c >= 1))]
