"""SGLang `/metrics` collector: Prometheus text -> `metrics.*` samples (gauges, rates, quantiles).

Owns scraping (every server at once, under one deadline per poll), the events, and the turn of
one scrape into rows. Parsing is collectors/promtext.py (prometheus_client's parser,
bad lines isolated, series and CPU time capped), the windows collectors/sglang/metrics_window.py,
names of every SGLang era and the rank rules collectors/sglang/metrics_alias.py, the arithmetic
collectors/prommath.py. Gauges are taken as they are; counters become per-second rates
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
| metrics.spec_accept_rate, spec_num_draft_tokens | 0-1, tokens | accepted / proposed drafts; draft tokens a verify checks | same names |
| metrics.spec_verify_calls_per_s | 1/s | Δ`spec_verify_calls_total` / Δt (0.5.13+) | `rate(sglang:spec_verify_calls_total[..])` |
| metrics.num_running_reqs_by_priority.<p>, num_queue_reqs_by_priority.<p> | requests | per-priority breakdown under --enable-priority-scheduling (metrics_alias.py `split_priority`) | `num_queue_reqs{priority="5"}` |
| metrics.http_requests_active | requests | HTTP requests in flight (0.5.23+) | same name |
| metrics.<gauge>.dp<i> / .tp<i> ... | as above | per-rank value when a rank label varies | filter by `dp_rank="i"` |
| metrics.prompt_tokens_per_s, generation_tokens_per_s, cached_tokens_per_s | tok/s | Δcounter / Δt between polls | `rate(sglang:prompt_tokens_total[..])` |
| metrics.requests_per_s, aborted_requests_per_s, retracted_requests_per_s | 1/s | Δcounter / Δt | `rate(sglang:num_requests_total[..])` |
| metrics.cached_token_ratio | 0-1 | Δcached_tokens / Δprompt_tokens in the window (token-weighted hit rate) | `rate(sglang:cached_tokens_total[..]) / rate(sglang:prompt_tokens_total[..])` |
| metrics.<h>_p50_s, _p95_s, _p99_s | s | windowed histogram quantile estimate, h in ttft, itl, e2e, queue_time, tpot | `histogram_quantile(0.99, sum by (le) (rate(..._bucket[..])))` |
| metrics.<h>_mean_s | s | Δsum / Δcount in the window | `rate(_sum)/rate(_count)` |
| metrics.<h>_clamped | 1/0 | 1 when any of p50/p95/p99 sits at the last finite bucket (true value higher) | compare with the `le="+Inf"` bucket |
| metrics.<h>_window_count | observations | Δcount in the window (what the estimates rest on) | Δ`_count` |
| metrics.diffusion_num_queue_reqs, diffusion_num_running_reqs | requests | image requests queued / running (diffusion server 0.5.21+) | `grep diffusion_num_` |
| metrics.diffusion_lora_loaded_adapters, diffusion_lora_active_adapters | adapters | loaded / unique active LoRA adapters | same names |
| metrics.diffusion_lora_active_modules | modules | pipeline modules with an active LoRA adapter | same name |
| metrics.diffusion_lora_module_active.<module> | 0-1 | 1 when that module has an active adapter (mean over replicas) | `diffusion_lora_module_active{module=...}` |
| metrics.diffusion_requests_per_s, diffusion_failed_requests_per_s | 1/s | Δ`diffusion_requests_total` / Δt, `is_warmup="true"` left out (failed: `status="error"`) | `rate(sglang:diffusion_requests_total{is_warmup="false"}[..])` |
| metrics.diffusion_e2e_p50_s/_p95_s/_p99_s/_mean_s, diffusion_queue_time_* | s | windowed quantiles of `diffusion_request_latency_seconds` / `diffusion_queue_time_seconds`, warm-up left out | `histogram_quantile(0.99, sum by (le) (rate(sglang:diffusion_request_latency_seconds_bucket{is_warmup="false"}[..])))` |
| metrics.diffusion_batch_size_p50/_p95/_p99/_mean | requests | requests per dispatched batch (a count: no `_s`) | `diffusion_generation_batch_size` |
| metrics.diffusion_stage_p50_s.<Stage>, _p95_s, _p99_s, _mean_s, _clamped, _window_count | s | per-stage windowed quantiles of `diffusion_stage_host_latency_seconds{stage=...}`; `<Stage>` as exported (`DenoisingStage`, `DecodingStage`, ...; `DenoisingStep` = seconds per denoising step) | `histogram_quantile(0.99, sum by (le) (rate(..._bucket{stage="DenoisingStage"}[..])))` |
| metrics.http_requests_per_s | 1/s | Δ`http_requests_total` / Δt | |

Counter and histogram windows use per-series deltas (metrics_window.py): a series that went
down restarted and counts from zero; a series that first appears in a family already seen counts
from zero (SGLang creates `status="error"` on the first failure: that failure is counted); a
family first seen after the server's first scrape counts from zero too (SGLang's
multiprocess registry shows a family from its first write). A failed-requests figure whose family is
exported but has no error series yet reads 0. A non-finite value (`+Inf`, `NaN`) is never stored:
its series is skipped until it reads a number again.

The drift guard (collectors/sglang/metrics_catalog.py) keeps each launch's catalogue of SGLang
families in the state (`sglang_metrics:<server_id>:catalog`) and writes ONE `metric_drift` event
per launch whose families differ from the launch before (gone, retyped, a label lost), naming what
in Pitwall read them (the `dependents` the runner's assembly sets: present/dependents.py).

Bounds, each hit leaving ONE `collector_error` event per server per episode (a run of scrapes
that hit it) naming the server and the setting: samples parsed per scrape
(`runner.metrics_max_series`; a family past it is skipped whole), parse CPU time per scrape
(`runner.metrics_parse_budget_s`), per-rank / per-stage keys per figure
(`runner.metrics_max_rank_keys`; the aggregate is kept), and one deadline for the whole poll
(`runner.metrics_deadline_s`; a server that misses it gets its own event, the others' rows come
back). Non-finite series and malformed lines are reported the same way, once per episode.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
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
from collectors.fanout import WORKERS, ServerPool
from collectors.http import DeadlineExceeded, auth_headers, capped_client, get_capped
from collectors.promtext import ParsedMetrics, ParseLimits, parse_metrics
from collectors.sglang.metrics_catalog import MAX_REPORTED, SETTLE_S, Drift
from collectors.sglang.metrics_catalog import step as catalog_step
from collectors.sglang.metrics_notes import Episodes, notes_for
from collectors.sglang.metrics_window import (
    DEFAULT_MAX_DETAIL_KEYS,
    Extracted,
    Window,
    absent_keys,
    compute,
    extract,
    window,
)

__all__ = [
    "Extracted",
    "ParsedMetrics",
    "SGLangMetricsCollector",
    "Snapshot",
    "absent_keys",
    "compute",
    "extract",
    "parse_metrics",
    "parse_metrics_cli",
    "snapshot",
    "snapshot_rows",
]

SOURCE = "metrics"
WAIT_S = 2.0  # a poll waits this long for its scrapes; a slower one is handed in by a later poll


@dataclass(slots=True)
class Snapshot:
    """One scrape's rows and new window state, and what was left out (for events)."""

    rows: list[SampleRow]
    state: dict[str, Any]
    window: Window = field(repr=False)


def snapshot(
    server: ServerTarget,
    parsed: ParsedMetrics,
    prev: dict[str, Any] | None,
    ts: float,
    max_detail_keys: int = DEFAULT_MAX_DETAIL_KEYS,
) -> Snapshot:
    """The rows of one scrape of `server` taken at `ts`, the new window state and the notes. Pure.

    The one conversion from a scrape to rows: the direct /metrics scrape and the Prometheus
    source (collectors/prometheus_source.py, which rebuilds each scrape from Prometheus's stored
    samples) both go through it, so a server reads the same either way. Every value is finite.
    """
    w = window(parsed, prev, ts, max_detail_keys)
    w.state["absent"] = absent_keys(parsed)
    rows = [
        SampleRow(ts, server.id, k, v, SOURCE, server.launch_id) for k, v in sorted(w.values.items())
    ]
    return Snapshot(rows, w.state, w)


def snapshot_rows(
    server: ServerTarget, parsed: ParsedMetrics, prev: dict[str, Any] | None, ts: float
) -> tuple[list[SampleRow], dict[str, Any]]:
    """`snapshot` as (rows, state)."""
    snap = snapshot(server, parsed, prev, ts)
    return snap.rows, snap.state


class SGLangMetricsCollector:
    """Scrapes `{base_url}/metrics` of every server each `interval_s` seconds, all at once, except
    servers with a `prometheus_url`: those are read through Prometheus (prometheus_source.py)."""

    name = "sglang_metrics"

    def __init__(
        self,
        interval_s: float = 5.0,
        timeout_s: float = 3.0,
        deadline_s: float = 10.0,
        *,
        limits: ParseLimits | None = None,
        max_rank_keys: int = DEFAULT_MAX_DETAIL_KEYS,
        workers: int = WORKERS,  # servers scraped at once (collectors/fanout.py)
    ) -> None:
        """`timeout_s`: per socket read, seconds; `deadline_s`: a whole poll (every server's
        scrape and parse), seconds; `limits`: series and CPU time per payload; `max_rank_keys`:
        per-rank / per-stage keys per figure."""
        self.interval_s = interval_s
        self.deadline_s = max(deadline_s, timeout_s)
        self.limits = limits or ParseLimits()
        self.max_rank_keys = max_rank_keys
        self._client = capped_client(timeout_s)
        self._servers = ServerPool(self.name, max_workers=max(1, workers))
        self._last_error: dict[int, str] = {}
        self._episodes = Episodes()  # one event per server per limit per episode
        #: Pitwall keys -> phrases naming what reads them (present/dependents.py, set by the
        #: runner's assembly); without it a drift event names the keys alone
        self.dependents: Callable[[Iterable[str]], list[str]] | None = None
        self.drift_settle_s = SETTLE_S

    def set_dependents(self, resolve: Callable[[Iterable[str]], list[str]]) -> None:
        self.dependents = resolve

    def configure(self, runner: dict[str, Any]) -> None:
        """Take the `runner.metrics_*` settings (config/settings.py); missing keys keep defaults.
        Raises ValueError naming a setting that is not above 0."""
        for k in ("metrics_max_series", "metrics_parse_budget_s", "metrics_deadline_s",
                  "metrics_max_rank_keys", "metrics_drift_settle_s"):
            if k in runner and not runner[k] > 0:
                self.close()
                raise ValueError(f"Setting runner.{k} is {runner[k]}; expected a number above 0 "
                                 "(README lists its default).")
        self.limits = ParseLimits(
            max_series=int(runner.get("metrics_max_series", self.limits.max_series)),
            budget_s=float(runner.get("metrics_parse_budget_s", self.limits.budget_s)),
        )
        self.max_rank_keys = int(runner.get("metrics_max_rank_keys", self.max_rank_keys))
        self.deadline_s = float(runner.get("metrics_deadline_s", self.deadline_s))
        self.drift_settle_s = float(runner.get("metrics_drift_settle_s", self.drift_settle_s))

    def scrape(self, server: ServerTarget, deadline_s: float | None = None) -> str:
        """The payload text; raises CollectorError with what to do on any failure."""
        url = server.metrics_endpoint
        headers = auth_headers(server.api_key)
        try:
            resp = get_capped(self._client, url, headers=headers,
                              deadline_s=self.deadline_s if deadline_s is None else deadline_s)
        except DeadlineExceeded:
            raise  # _poll_one names the server and the poll's setting
        except CollectorError as exc:  # a cap or an encoding: its message names the limit
            raise CollectorError(f"Server {server.name!r}: {exc}") from exc
        except httpx.HTTPError as exc:
            raise CollectorError(
                f"Could not reach {url} ({type(exc).__name__}: {exc}); check that server "
                f"{server.name!r} is running and its {'metrics_url' if server.metrics_url else 'base_url'} is right."
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

    def _late(self, server: ServerTarget) -> CollectorError:
        return CollectorError(
            f"Server {server.name!r}: scraping and parsing /metrics did not finish within the "
            f"poll's {self.deadline_s:g} s deadline (runner.metrics_deadline_s, the limit); its "
            "figures are missing until it answers in time, the other servers' are kept."
        )

    def _poll_one(self, ctx: CollectorContext, server: ServerTarget) -> PollResult:
        """In a worker thread (collectors/fanout.py): scrape, parse and turn into rows; the
        window state it saves is kept only if the whole of it finishes within the poll."""
        try:
            text = self.scrape(server)
        except DeadlineExceeded as exc:
            raise self._late(server) from exc
        return self._ingest(ctx, server, parse_metrics(text, self.limits), ctx.now())

    def poll(self, ctx: CollectorContext) -> PollResult:
        # a server with a prometheus_url is read through that Prometheus (prometheus_source)
        servers = [s for s in ctx.servers if s.serving and not s.prometheus_url]
        # a scrape still running after WAIT_S is handed in by a later poll (collectors/fanout.py);
        # its own deadline (runner.metrics_deadline_s) ends it
        fan = self._servers.poll_servers(ctx, servers, self._poll_one, wait_s=min(WAIT_S, self.deadline_s))
        result = fan.result
        failures: list[str] = []
        for server, exc in fan.failed:
            msg = str(exc) if isinstance(exc, CollectorError) else (
                f"Server {server.name!r}: reading /metrics failed ({type(exc).__name__}: {exc}); "
                "its figures are missing until it answers normally.")
            failures.append(msg)
            if self._last_error.get(server.id) != msg:  # once per episode
                self._last_error[server.id] = msg
                result.events.append(EventRow(ctx.now(), server.id, "collector_error", msg,
                                              launch_id=server.launch_id))
        for server in fan.done:
            self._last_error.pop(server.id, None)
        if failures and len(failures) == len(servers) and not result.samples:
            raise CollectorError(failures[0] if len(failures) == 1 else "; ".join(failures))
        return result

    def ingest(
        self, ctx: CollectorContext, server: ServerTarget, text: str, ts: float
    ) -> PollResult:
        """Parse one payload for one server, update its window state, return its rows."""
        return self._ingest(ctx, server, parse_metrics(text, self.limits), ts)

    def _ingest(
        self, ctx: CollectorContext, server: ServerTarget, parsed: ParsedMetrics, ts: float
    ) -> PollResult:
        key = f"{self.name}:{server.id}:window"
        out = PollResult()
        snap = snapshot(server, parsed, ctx.load_state(key), ts, self.max_rank_keys)
        out.samples = snap.rows
        ctx.save_state(key, snap.state)
        notes = notes_for(f"Server {server.name!r} /metrics", parsed, snap.window, self.max_rank_keys)
        out.events = self._episodes.events(server, notes, ts)
        cat_key = f"{self.name}:{server.id}:catalog"
        before = ctx.load_state(cat_key)
        catalog, drift = catalog_step(before, server.launch_id, parsed, ts, settle_s=self.drift_settle_s)
        if catalog != before:  # most scrapes change nothing: no write on the poll's hot path
            ctx.save_state(cat_key, catalog)
        if drift:
            out.events.append(self._drift_event(server, drift, ts))
        return out

    def _drift_event(self, server: ServerTarget, drift: list[Drift], ts: float) -> EventRow:
        """ONE `metric_drift` event for what one epoch's judgement found: each family, what it fed
        and what reads that; a warning when a figure lost its input, info when every family is a
        rename Pitwall reads through or fed nothing of Pitwall's."""
        when = (f"since launch #{server.launch_id}" if server.launch_id is not None
                else "since the server restarted")
        parts, losing = [], False
        for d in drift[:MAX_REPORTED]:
            readers = (self.dependents(d.keys) if self.dependents is not None else list(d.keys)) if d.keys else []
            fed = f" It fed {'; '.join(readers)}." if readers else " Nothing in Pitwall read it."
            losing = losing or bool(readers and not d.served_by)
            parts.append(f"{d.sentence()}.{fed}")
        if len(drift) > MAX_REPORTED:
            parts.append(f"And {len(drift) - MAX_REPORTED} more families ({', '.join(d.family for d in drift[MAX_REPORTED:])[:500]}).")
            losing = losing or any(d.keys and not d.served_by for d in drift[MAX_REPORTED:])
        advice = (" Those figures stay empty until the server exports the family again: check the "
                  "release notes of the version now running, and the launch flags." if losing else "")
        msg = f"Server {server.name!r}: /metrics changed {when}. " + " ".join(parts) + advice
        raw = json.dumps([{"family": d.family, "change": d.change, "before": d.before, "after": d.after,
                           "keys": list(d.keys), "served_by": d.served_by} for d in drift[:MAX_REPORTED]])
        if losing:
            return EventRow(ts, server.id, "metric_drift", msg, raw=raw, launch_id=server.launch_id)
        return EventRow(ts, server.id, "metric_drift", msg, severity="info", raw=raw, launch_id=server.launch_id,
                        severity_reason="every change is a rename Pitwall reads, or feeds nothing of Pitwall's")

    def close(self) -> None:
        self._servers.close()
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
    for _, text in parsed.limits:
        print(f"  limit: {text}")
    for k, v in sorted(values.items()):
        print(f"  {k} = {v:g}")
    absent = absent_keys(parsed)
    if absent:
        print("  not exported by this server/version: " + ", ".join(absent))
    return 0
