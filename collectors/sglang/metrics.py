"""SGLang `/metrics` collector: Prometheus text -> `metrics.*` samples (gauges, rates, quantiles).

Owns the turn from one scrape (plus the previous scrape's state) into Pitwall keys. Parsing is
collectors/sglang/metrics_parse.py (prometheus_client's parser, bad lines isolated), names of every
SGLang era and the rank rules are collectors/sglang/metrics_alias.py, the arithmetic is
collectors/sglang/metrics_math.py. Gauges are taken as they are; counters become per-second rates
and histograms windowed quantiles over the time between two polls, so the first poll of a server
yields gauges only. A metric the server does not export gives no sample (never 0): `absent_keys()`
lists those keys, and the collector keeps the list in its state
(`sglang_metrics:<server_id>:window` -> `"absent"`) for the dashboard's
"not exported by this server/version".

| key | unit | meaning | cross-check |
|---|---|---|---|
| metrics.num_running_reqs, num_queue_reqs | requests | running batch / waiting queue (sum over DP) | `curl -s $URL/metrics \\| grep num_running_reqs` |
| metrics.num_used_tokens, max_total_num_tokens | tokens | KV tokens in use / capacity | same, `num_used_tokens` |
| metrics.token_usage | 0-1 | KV-cache usage (mean over ranks) | `token_usage` |
| metrics.gen_throughput_tok_s | tok/s | decode throughput at the last decode log | `gen_throughput`; log `gen throughput (token/s)` |
| metrics.cache_hit_rate | 0-1 | SGLang's own hit-rate gauge (0.4.4+: last prefill batch) | `cache_hit_rate` |
| metrics.num_grammar_queue_reqs, num_paused_reqs, num_retracted_reqs | requests | other queues | same names |
| metrics.spec_accept_length, utilization | -, 0-1 | speculative accept length, scheduler utilisation | same names |
| metrics.http_requests_active | requests | HTTP requests in flight (0.5.23+) | same name |
| metrics.<gauge>.dp<i> / .tp<i> ... | as above | per-rank value when a rank label varies | filter by `dp_rank="i"` |
| metrics.prompt_tokens_per_s, generation_tokens_per_s, cached_tokens_per_s | tok/s | Δcounter / Δt between polls | `rate(sglang:prompt_tokens_total[..])` |
| metrics.requests_per_s, aborted_requests_per_s, retracted_requests_per_s | 1/s | Δcounter / Δt | `rate(sglang:num_requests_total[..])` |
| metrics.cached_token_ratio | 0-1 | Δcached_tokens / Δprompt_tokens in the window (token-weighted hit rate) | §3.3 PromQL |
| metrics.<h>_p50_s, _p95_s, _p99_s | s | windowed histogram quantile estimate, h in ttft, itl, e2e, queue_time, tpot | `histogram_quantile(0.99, sum by (le) (rate(..._bucket[..])))` |
| metrics.<h>_mean_s | s | Δsum / Δcount in the window | `rate(_sum)/rate(_count)` |
| metrics.<h>_clamped | 1/0 | 1 when any of p50/p95/p99 sits at the last finite bucket (true value higher) | compare with the `le="+Inf"` bucket |
| metrics.<h>_window_count | observations | Δcount in the window (what the estimates rest on) | Δ`_count` |
| metrics.diffusion_num_queue_reqs, diffusion_num_running_reqs | requests | image requests queued / running (diffusion server 0.5.21+) | `grep diffusion_num_` |
| metrics.diffusion_lora_loaded_adapters | adapters | loaded LoRA adapters | same name |
| metrics.diffusion_requests_per_s, diffusion_failed_requests_per_s | 1/s | Δ`diffusion_requests_total` / Δt, `is_warmup="true"` left out (failed: `status="error"`) | `rate(sglang:diffusion_requests_total{is_warmup="false"}[..])` |
| metrics.diffusion_e2e_p50_s/_p95_s/_p99_s/_mean_s, diffusion_queue_time_* | s | windowed quantiles of `diffusion_request_latency_seconds` / `diffusion_queue_time_seconds`, warm-up left out | `histogram_quantile(0.99, sum by (le) (rate(sglang:diffusion_request_latency_seconds_bucket{is_warmup="false"}[..])))` |
| metrics.diffusion_batch_size_p50/_p95/_p99/_mean | requests | requests per dispatched batch (a count: no `_s`) | `diffusion_generation_batch_size` |
| metrics.diffusion_stage_p50_s.<Stage>, _p95_s, _p99_s, _mean_s, _clamped, _window_count | s | per-stage windowed quantiles of `diffusion_stage_host_latency_seconds{stage=...}`; `<Stage>` as exported (`DenoisingStage`, `DecodingStage`, ...; `DenoisingStep` = seconds per denoising step) | `histogram_quantile(0.99, sum by (le) (rate(..._bucket{stage="DenoisingStage"}[..])))` |
| metrics.http_requests_per_s | 1/s | Δ`http_requests_total` / Δt | |

Counter and histogram windows use per-series deltas: a series that went down restarted (the
server restarted) and counts from zero; a series seen for the first time is its own baseline
(as Prometheus `rate()` does), so it adds nothing to the window it appears in.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from collectors.base import (
    CollectorContext,
    CollectorError,
    EventRow,
    PollResult,
    SampleRow,
    ServerTarget,
)
from collectors.http import auth_headers, capped_client, get_capped
from collectors.sglang.metrics_alias import (
    ALIASES,
    LOOKUP,
    Alias,
    aggregate,
    excluded,
    label_key,
    pitwall_keys,
    rank_detail,
)
from collectors.sglang.metrics_math import bucket_delta, counter_delta, histogram_quantile, parse_le
from collectors.sglang.metrics_parse import ParsedMetrics, parse_metrics

__all__ = [
    "ParsedMetrics",
    "SGLangMetricsCollector",
    "absent_keys",
    "compute",
    "extract",
    "parse_metrics",
    "parse_metrics_cli",
    "snapshot_rows",
]

SOURCE = "metrics"
QUANTILES: tuple[tuple[str, float], ...] = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))
LabelKey = tuple[tuple[str, str], ...]


@dataclass(slots=True)
class _Hist:
    buckets: dict[float, float] = field(default_factory=dict)
    sum: float | None = None
    count: float | None = None


@dataclass(slots=True)
class Extracted:
    """One scrape's SGLang series by Pitwall alias (first era name present wins)."""

    gauges: dict[str, dict[LabelKey, float]] = field(default_factory=dict)
    counters: dict[str, dict[LabelKey, float]] = field(default_factory=dict)
    hists: dict[str, dict[LabelKey, _Hist]] = field(default_factory=dict)
    source: dict[str, str] = field(default_factory=dict)  # alias key -> SGLang base name used


def extract(parsed: ParsedMetrics) -> Extracted:
    """Group the samples Pitwall knows by alias; others (and `_created`) are ignored. Pure."""
    by_base: dict[tuple[str, str], list[tuple[str, dict[str, str], float]]] = {}
    aliases: dict[str, Alias] = {}
    for s in parsed.samples:
        hits = LOOKUP.get(s.name)
        if hits is None or math.isnan(s.value):
            continue
        for alias, base, part in hits:
            if alias.exclude and excluded(alias, s.labels):
                continue
            aliases[alias.key] = alias
            by_base.setdefault((alias.key, base), []).append((part, s.labels, s.value))
    out = Extracted()
    for key, alias in aliases.items():
        base = next(b for b in alias.names if (key, b) in by_base)
        out.source[key] = base
        rows = by_base[(key, base)]
        if alias.kind == "gauge":
            out.gauges[key] = {label_key(lb): v for _, lb, v in rows}
        elif alias.kind == "counter":
            series: dict[LabelKey, float] = {}
            for _, lb, v in rows:
                lk = label_key(lb)
                series[lk] = series.get(lk, 0.0) + v  # `x` and `x_total` never coexist; be safe
            out.counters[key] = series
        else:
            hists: dict[LabelKey, _Hist] = {}
            for part, lb, v in rows:
                h = hists.setdefault(label_key(lb), _Hist())
                if part == "bucket":
                    le = parse_le(lb.get("le", ""))
                    if le is not None:
                        h.buckets[le] = v
                elif part == "sum":
                    h.sum = v
                else:
                    h.count = v
            out.hists[key] = hists
    return out


def absent_keys(parsed: ParsedMetrics) -> list[str]:
    """Pitwall `metrics.*` keys this payload cannot feed: "not exported by this server/version"."""
    ex = extract(parsed)
    present = set(ex.gauges) | set(ex.counters) | set(ex.hists)
    produced = {k for a in ALIASES if a.key in present for k in pitwall_keys(a)}
    if {"prompt_tokens_per_s", "cached_tokens_per_s"} <= present:
        produced.add("metrics.cached_token_ratio")
    # an image server exports the diffusion family and an LLM server the rest: each is judged
    # against its own family, so an LLM's "not exported" list never fills with diffusion keys
    diffusion = any(k.startswith("diffusion_") for k in present)
    every = {k for a in ALIASES if a.key.startswith("diffusion_") == diffusion for k in pitwall_keys(a)}
    if not diffusion:
        every.add("metrics.cached_token_ratio")
    return sorted(every - produced)


def _sid(lk: LabelKey) -> str:
    return json.dumps([list(p) for p in lk], separators=(",", ":"))


def _alias(key: str) -> Alias:
    return next(a for a in ALIASES if a.key == key)


def compute(
    parsed: ParsedMetrics, prev: dict[str, Any] | None, ts: float
) -> tuple[dict[str, float], dict[str, Any]]:
    """(metric key -> value, new state) for one scrape at `ts` given the previous state. Pure."""
    ex = extract(parsed)
    values: dict[str, float] = {}
    for key, series in ex.gauges.items():
        agg = _alias(key).agg
        total = aggregate(series, agg)
        if total is not None:
            values[f"metrics.{key}"] = total
        for suffix, v in rank_detail(series, agg).items():
            values[f"metrics.{key}.{suffix}"] = v

    state: dict[str, Any] = {"ts": ts, "c": {}, "h": {}}
    prev_ts = prev.get("ts") if prev else None
    dt = ts - prev_ts if isinstance(prev_ts, int | float) else None
    windowed = dt is not None and dt > 0
    prev_c: dict[str, dict[str, float]] = (prev or {}).get("c", {})
    prev_h: dict[str, dict[str, Any]] = (prev or {}).get("h", {})

    deltas: dict[str, float] = {}
    for key, series in ex.counters.items():
        state["c"][key] = {_sid(lk): v for lk, v in series.items()}
        if not windowed:
            continue
        old = prev_c.get(key, {})
        inc: dict[LabelKey, float] = {}
        for lk, v in series.items():
            d = counter_delta(old.get(_sid(lk)), v)
            if d is not None:
                inc[lk] = d
        if key not in prev_c:
            continue  # the whole family is new: no baseline yet
        total = aggregate(inc, _alias(key).agg) or 0.0
        deltas[key] = total
        assert dt is not None
        values[f"metrics.{key}"] = total / dt
    if deltas.get("prompt_tokens_per_s", 0.0) > 0 and "cached_tokens_per_s" in deltas:
        values["metrics.cached_token_ratio"] = (
            deltas["cached_tokens_per_s"] / deltas["prompt_tokens_per_s"]
        )

    for key, hists in ex.hists.items():
        state["h"][key] = {
            _sid(lk): {"b": {repr(le): c for le, c in h.buckets.items()}, "s": h.sum, "n": h.count}
            for lk, h in hists.items()
        }
        if not windowed or key not in prev_h:
            continue
        split = _alias(key).split
        if split is None:
            values.update(_window_hist(key, hists, prev_h[key]))
            continue
        parts: dict[str, dict[LabelKey, _Hist]] = {}
        for lk, h in hists.items():
            parts.setdefault(dict(lk).get(split, ""), {})[lk] = h
        for part, sub in sorted(parts.items()):
            got = _window_hist(key, sub, prev_h[key])
            values.update({f"{k}.{part}": v for k, v in got.items()})
    return values, state


def _window_hist(key: str, hists: dict[LabelKey, _Hist], old: dict[str, Any]) -> dict[str, float]:
    per_le: dict[float, dict[LabelKey, float]] = {}
    sums: dict[LabelKey, float] = {}
    counts: dict[LabelKey, float] = {}
    for lk, h in hists.items():
        o = old.get(_sid(lk))
        if o is None:
            continue  # first sighting of this series: its baseline
        prev_b = {float(k): float(v) for k, v in o.get("b", {}).items()}
        prev_n = o.get("n") if isinstance(o.get("n"), int | float) else None
        prev_s = o.get("s") if isinstance(o.get("s"), int | float) else None
        # a count or any bucket that went down means the server restarted: count from zero
        reset = (h.count is not None and prev_n is not None and h.count < prev_n) or any(
            h.buckets.get(le, 0.0) < v for le, v in prev_b.items()
        )
        d = dict(h.buckets) if reset else bucket_delta(prev_b, h.buckets)
        if d is None:
            continue
        for le, c in d.items():
            per_le.setdefault(le, {})[lk] = c
        if h.count is not None:
            dn = h.count if reset else counter_delta(prev_n, h.count)
            if dn is not None:
                counts[lk] = dn
        if h.sum is not None:
            ds = h.sum if reset else counter_delta(prev_s, h.sum)
            if ds is not None:
                sums[lk] = ds
    agg = _alias(key).agg
    buckets = {le: aggregate(vals, agg) or 0.0 for le, vals in per_le.items()}
    out: dict[str, float] = {}
    stem, unit = f"metrics.{key}", _alias(key).unit
    n = aggregate(counts, agg)
    if n is None and buckets and math.inf in buckets:
        n = buckets[math.inf]
    if n is not None:
        out[f"{stem}_window_count"] = n
    s = aggregate(sums, agg)
    if n and s is not None:
        out[f"{stem}_mean{unit}"] = s / n
    clamped = False
    for label, q in QUANTILES:
        est = histogram_quantile(q, buckets)
        if est is not None:
            out[f"{stem}_{label}{unit}"] = est.value
            clamped = clamped or est.clamped
    if f"{stem}_p50{unit}" in out:
        out[f"{stem}_clamped"] = 1.0 if clamped else 0.0
    return out


def snapshot_rows(
    server: ServerTarget, parsed: ParsedMetrics, prev: dict[str, Any] | None, ts: float
) -> tuple[list[SampleRow], dict[str, Any]]:
    """The sample rows of one scrape of `server` taken at `ts`, and the new window state. Pure.

    The one conversion from a scrape to rows: the direct /metrics scrape and the Prometheus
    source (collectors/prometheus_source.py, which rebuilds each scrape from Prometheus's stored
    samples) both go through it, so a server reads the same either way.
    """
    values, state = compute(parsed, prev, ts)
    state["absent"] = absent_keys(parsed)
    rows = [
        SampleRow(ts, server.id, k, v, SOURCE, server.launch_id) for k, v in sorted(values.items())
    ]
    return rows, state


class SGLangMetricsCollector:
    """Scrapes `{base_url}/metrics` of every server each `interval_s` seconds, except servers
    with a `prometheus_url`: those are read through Prometheus (collectors/prometheus_source.py)."""

    name = "sglang_metrics"

    def __init__(
        self, interval_s: float = 5.0, timeout_s: float = 3.0, deadline_s: float = 10.0
    ) -> None:
        """`timeout_s`: per socket read, seconds; `deadline_s`: a whole scrape, seconds."""
        self.interval_s = interval_s
        self.deadline_s = max(deadline_s, timeout_s)
        self._client = capped_client(timeout_s)
        self._last_error: dict[int, str] = {}

    def scrape(self, server: ServerTarget) -> str:
        """The payload text; raises CollectorError with what to do on any failure."""
        url = server.base_url.rstrip("/") + "/metrics"
        headers = auth_headers(server.api_key)
        try:
            resp = get_capped(self._client, url, headers=headers, deadline_s=self.deadline_s)
        except CollectorError:
            raise  # a cap or the deadline: its message names the limit
        except httpx.HTTPError as exc:
            raise CollectorError(
                f"Could not reach {url} ({type(exc).__name__}: {exc}); check that server "
                f"{server.name!r} is running and its base_url is right."
            ) from exc
        if resp.status_code == 404:
            raise CollectorError(
                f"{url} returned 404: server {server.name!r} exports no Prometheus metrics; "
                "start SGLang with --enable-metrics."
            )
        if resp.status_code in (401, 403):
            raise CollectorError(
                f"{url} refused the request ({resp.status_code}): set the server's api_key."
            )
        if resp.status_code != 200:
            raise CollectorError(
                f"{url} returned HTTP {resp.status_code}; the server may be starting or failing."
            )
        return resp.text

    def poll(self, ctx: CollectorContext) -> PollResult:
        result = PollResult()
        failures: list[str] = []
        # a server with a prometheus_url is read through that Prometheus (prometheus_source)
        servers = [s for s in ctx.servers if s.serving and not s.prometheus_url]
        for server in servers:
            try:
                text = self.scrape(server)
            except CollectorError as exc:
                failures.append(str(exc))
                if self._last_error.get(server.id) != str(exc):
                    self._last_error[server.id] = str(exc)
                    result.events.append(
                        EventRow(
                            ctx.now(),
                            server.id,
                            "collector_error",
                            str(exc),
                            "warning",
                            launch_id=server.launch_id,
                        )
                    )
                continue
            self._last_error.pop(server.id, None)
            result.extend(self.ingest(ctx, server, text, ctx.now()))
        if failures and len(failures) == len(servers) and not result.samples:
            raise CollectorError(failures[0] if len(failures) == 1 else "; ".join(failures))
        return result

    def ingest(
        self, ctx: CollectorContext, server: ServerTarget, text: str, ts: float
    ) -> PollResult:
        """Parse one payload for one server, update its window state, return its rows."""
        parsed = parse_metrics(text)
        key = f"{self.name}:{server.id}:window"
        out = PollResult()
        out.samples, state = snapshot_rows(server, parsed, ctx.load_state(key), ts)
        ctx.save_state(key, state)
        if parsed.errors:
            msg = (
                f"{len(parsed.errors)} malformed line(s) in {server.name!r} /metrics were skipped "
                f"(first: {parsed.errors[0]})"
            )
            out.events.append(
                EventRow(
                    ts,
                    server.id,
                    "collector_error",
                    msg,
                    "warning",
                    raw="\n".join(parsed.errors[:20]),
                )
            )
        return out

    def close(self) -> None:
        self._client.close()


def parse_metrics_cli(argv: list[str] | None = None) -> int:
    """`pitwall parse-metrics FILE [--json]`: parse a saved /metrics payload; 0 unless unreadable."""
    parser = argparse.ArgumentParser(
        prog="pitwall parse-metrics", description="Parse a saved SGLang /metrics payload."
    )
    parser.add_argument(
        "file", help="a Prometheus text file (curl -s $URL/metrics > FILE); - for stdin"
    )
    parser.add_argument(
        "--json", action="store_true", help="print {samples, families, errors} as JSON"
    )
    args = parser.parse_args(argv)
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"Cannot read {args.file}: {exc}; pass a saved /metrics text file.", file=sys.stderr)
        return 2
    parsed = parse_metrics(text)
    if args.json:
        print(json.dumps(parsed.to_json()))
        return 0
    values, _ = compute(parsed, None, 0.0)
    print(
        f"{len(parsed.families)} families, {len(parsed.samples)} samples, {len(parsed.errors)} errors"
    )
    for err in parsed.errors:
        print(f"  error: {err}")
    for k, v in sorted(values.items()):
        print(f"  {k} = {v:g}")
    absent = absent_keys(parsed)
    if absent:
        print("  not exported by this server/version: " + ", ".join(absent))
    return 0
