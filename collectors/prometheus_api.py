"""Reads of a Prometheus server's HTTP API (v1) for Prometheus as a source: the raw samples of a
server's series, `query_range` at a step, and the server's scrape target (interval, labels).

Every read goes through `get_capped` (collectors/http.py): a total deadline and a body cap per
call, counted after decompression. Failures become one CollectorError saying what is wrong and what to do (a down Prometheus,
an HTTP error, a query Prometheus refused, a body over the cap). Pure decoding (`decode_matrix`)
is separate from the reads so tests feed it JSON.

Cross-check any read with curl, e.g.
`curl -s "$PROM/api/v1/query" --data-urlencode 'query={instance="h:30000"}[60s]'`.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpx

from collectors.base import CollectorError
from collectors.http import MIB, CapExceeded, capped_client, get_capped
from collectors.http_decode import EncodingError

#: the largest API answer read, bytes after decompression (a 10-minute raw window of one server
#: is ~1-5 MiB)
BODY_CAP = 64 * MIB
DEFAULT_SCRAPE_INTERVAL_S = 15.0  # Prometheus's own default scrape_interval
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?$")


class TooLarge(CollectorError):
    """An API answer passed the body cap (bytes): read a shorter window."""


@dataclass(frozen=True, slots=True)
class Series:
    """One series of an API answer: its labels (`__name__` included) and (ts s, value) points."""

    labels: dict[str, str]
    points: list[tuple[float, float]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.labels.get("__name__", "")


@dataclass(frozen=True, slots=True)
class ScrapeTarget:
    """The Prometheus target behind a selector: its scrape interval (s) and target labels
    (job, instance and any relabelled ones, which Prometheus added to every series)."""

    interval_s: float
    labels: dict[str, str]
    health: str  # up | down | unknown


def parse_duration(text: str) -> float | None:
    """A Prometheus duration ("15s", "1m30s", "500ms") in seconds; None if not one."""
    m = _DURATION.match(text.strip()) if text else None
    if not m or not any(m.groups()):
        return None
    h, mi, s, ms = (int(g) if g else 0 for g in m.groups())
    return h * 3600 + mi * 60 + s + ms / 1000


def matchers(selector: str) -> str:
    """The selector as the inside of `{...}`: braces stripped, so it can join other matchers."""
    sel = selector.strip()
    if sel.startswith("{") and sel.endswith("}"):
        sel = sel[1:-1].strip()
    return sel


def decode_matrix(body: Any) -> list[Series]:
    """An API answer of resultType matrix (or vector) -> Series; NaN and ±Inf values are kept as
    floats. Raises CollectorError for an answer that is not a Prometheus success."""
    if not isinstance(body, dict) or body.get("status") != "success":
        err = body.get("error") if isinstance(body, dict) else None
        raise CollectorError(f"Prometheus answered an error: {err or body!r:.200}.")
    data = body.get("data") or {}
    out: list[Series] = []
    for item in data.get("result") or []:
        labels = {str(k): str(v) for k, v in (item.get("metric") or {}).items()}
        pairs = item.get("values") or ([item["value"]] if "value" in item else [])
        out.append(Series(labels, [(float(t), float(v)) for t, v in pairs]))
    return out


class PromClient:
    """One Prometheus base URL; `deadline_s` bounds each call in total, `max_bytes` its body."""

    def __init__(self, url: str, *, deadline_s: float = 20.0, max_bytes: int = BODY_CAP,
                 client: httpx.Client | None = None) -> None:
        self.url = url.rstrip("/")
        self.deadline_s = deadline_s
        self.max_bytes = max_bytes
        self._client = client or capped_client(deadline_s)
        self._own = client is None

    def api(self, path: str, params: dict[str, str]) -> Any:
        """GET /api/v1/<path>?params as JSON; CollectorError naming the URL and what to do."""
        url = f"{self.url}/api/v1/{path}"
        full = f"{url}?{urlencode(params)}" if params else url
        try:
            resp = get_capped(self._client, full, deadline_s=self.deadline_s,
                              max_bytes=self.max_bytes)
        except CapExceeded as exc:
            raise TooLarge(f"Prometheus {self.url}: {exc} Read a shorter window or narrow the "
                           "selector.") from exc
        except EncodingError as exc:  # an encoding Pitwall does not decode, or a broken stream
            raise CollectorError(f"Prometheus {self.url}: {exc}") from exc
        except CollectorError as exc:  # the total deadline
            raise CollectorError(f"Prometheus {self.url}: {exc} Read a shorter window, or check "
                                 "the Prometheus server's load.") from exc
        except httpx.HTTPError as exc:
            raise CollectorError(
                f"Could not reach Prometheus at {self.url} ({type(exc).__name__}: {exc}); check "
                "that it is running and that prometheus.url / prometheus_url is right."
            ) from exc
        try:
            body = resp.json()
        except ValueError:
            body = None
        if resp.status_code != 200 or not isinstance(body, dict):
            why = body.get("error") if isinstance(body, dict) else resp.text[:200]
            raise CollectorError(
                f"Prometheus {url} returned HTTP {resp.status_code} ({why}); check the selector "
                "(label matchers such as instance=\"host:port\") and that the URL is a Prometheus."
            )
        return body

    def raw(self, selector: str, end: float, window_s: float) -> list[Series]:
        """Every stored sample of the selector's series in (end - window_s, end], with its own
        timestamp: a range-vector instant query, so nothing is filled in between scrapes."""
        ms = max(1, int(round(window_s * 1000)))
        query = f"{{{selector}}}[{ms}ms]"
        return decode_matrix(self.api("query", {"query": query, "time": _ts(end)}))

    def range(self, query: str, start: float, end: float, step_s: float) -> list[Series]:
        """`query_range` from start to end (s) at step_s: one point per step, each the last sample
        at or before it within Prometheus's lookback (5 min), so a gap is filled: see `gap_mask`."""
        params = {"query": query, "start": _ts(start), "end": _ts(end), "step": f"{step_s:g}"}
        return decode_matrix(self.api("query_range", params))

    def target(self, selector: str) -> ScrapeTarget | None:
        """The scrape target whose `up` series the selector matches; None when none does."""
        ups = decode_matrix(self.api("query", {"query": f"up{{{selector}}}"}))
        if not ups:
            return None
        labels = {k: v for k, v in ups[0].labels.items() if k != "__name__"}
        health = "up" if ups[0].points and ups[0].points[-1][1] == 1 else "down"
        interval = None
        body = self.api("targets", {"state": "active"})
        for t in (body.get("data") or {}).get("activeTargets") or []:
            if all(t.get("labels", {}).get(k) == v for k, v in labels.items()):
                interval = parse_duration(str(t.get("scrapeInterval", "")))
                break
        # a Prometheus that just started lists no targets for a few seconds: measure the spacing
        # of the target's last `up` samples instead
        return ScrapeTarget(interval or self._spacing(selector) or DEFAULT_SCRAPE_INTERVAL_S,
                            labels, health)

    def _spacing(self, selector: str) -> float | None:
        """The scrape interval the target's last `up` samples show (10 min at most), s."""
        found = self.raw(f'__name__="up",{selector}', time.time(), 600.0)
        return interval_from_spacing([t for s in found[:1] for t, _ in s.points])

    def close(self) -> None:
        if self._own:
            self._client.close()


def interval_from_spacing(stamps: list[float]) -> float | None:
    """The scrape interval that sample times show: the median gap of the last 11, to two
    significant figures. A configured interval is a round number and the gaps jitter around it
    by a millisecond or so (1.001 s for `1s`); the exact median would make every later step and
    gap test off by that jitter. None with fewer than two samples. Pure."""
    ts = sorted(stamps)[-11:]
    steps = sorted(b - a for a, b in zip(ts, ts[1:], strict=False))
    if not steps or steps[len(steps) // 2] <= 0:
        return None
    return float(f"{steps[len(steps) // 2]:.2g}")


def _ts(t: float) -> str:
    return f"{t:.3f}"


def gap_mask(point_ts: list[float], sample_ts: list[float | None], max_age_s: float) -> list[bool]:
    """True where a `query_range` point is a gap: its underlying sample (from `timestamp()`) is
    missing or older than max_age_s at the point's time. Pure."""
    return [
        s is None or math.isnan(s) or t - s > max_age_s for t, s in zip(point_ts, sample_ts, strict=True)
    ]
