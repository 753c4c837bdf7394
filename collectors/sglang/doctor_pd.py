"""SGLang's PD-disaggregation doctor rules (--disaggregation-mode prefill|decode): a KV transfer
that takes a large share of the time to first token, and transfers that fail.

Evidence (collectors/sglang/metrics.py keys, one sample a scrape, each a window's mean):
the prefill server's `kv_transfer_latency_mean_s` against its own `ttft_mean_s` (a prefill server
answers once its transfer concludes, so its TTFT holds the transfer); the decode server's wait
for the KV (`stage_latency_mean_s.decode_transferred`) against its TTFT; both sides'
`transfer_failed_per_s` and `bootstrap_failed_per_s`. Pure functions, each tested firing and not firing.
"""

from __future__ import annotations

import numpy as np

from collectors.tuning import Evidence, Finding
from storage import series_keys as sk

TRANSFER_KEYS = (sk.hist_key("kv_transfer_latency", "mean"),)
DECODE_WAIT_KEYS = (sk.hist_key("stage_latency", "mean") + ".decode_transferred",)
TTFT_KEYS = (sk.hist_key("ttft", "mean"),)
FAIL_KEYS = (sk.METRICS_TRANSFER_FAILED_PER_S, sk.METRICS_BOOTSTRAP_FAILED_PER_S)
SPEED_KEYS = (sk.hist_key("kv_transfer_speed", "p50"),)
SERIES = (*TRANSFER_KEYS, *DECODE_WAIT_KEYS, *TTFT_KEYS, *FAIL_KEYS, *SPEED_KEYS)
SHARE = 0.25  # of the TTFT, median over the window
FLOOR_S = 0.010  # a transfer under 10 ms is no finding, whatever its share of a fast TTFT
MIN_SAMPLES = 3


def _mode(ev: Evidence) -> str | None:
    mode = ev.arg("disaggregation_mode")
    return mode if mode in ("prefill", "decode") else None


def _share(ev: Evidence) -> tuple[float, float, int] | None:
    """(transfer seconds p50, TTFT seconds p50, samples) of this role, or None."""
    moved = ev.first(TRANSFER_KEYS if _mode(ev) == "prefill" else DECODE_WAIT_KEYS)
    ttft = ev.first(TTFT_KEYS)
    if moved.size < MIN_SAMPLES or ttft.size < MIN_SAMPLES or float(np.median(ttft)) <= 0:
        return None
    return float(np.median(moved)), float(np.median(ttft)), int(moved.size)


def rule_pd_transfer_slow(ev: Evidence) -> Finding | None:
    """The KV cache's trip from prefill to decode is a large part of the time to first token."""
    if _mode(ev) is None:
        return None
    got = _share(ev)
    if got is None or got[0] < FLOOR_S or got[0] < SHARE * got[1]:
        return None
    moved, ttft, n = got
    speed = ev.first(SPEED_KEYS)
    rate = f"; transfer speed p50 {float(np.median(speed)) / 2 ** 30:.1f} GiB/s" if speed.size else ""
    what = ("the KV transfer takes" if _mode(ev) == "prefill" else "waiting for the KV cache from prefill takes")
    backend = ev.arg("disaggregation_transfer_backend") or "?"
    return Finding("pd_transfer_slow", "KV transfer from prefill to decode is slow",
                   f"{what} {moved * 1e3:.0f} ms of a {ttft * 1e3:.0f} ms time to first token "
                   f"({moved / ttft * 100:.0f} %, median of {n} windows; fires at {SHARE * 100:.0f} % and "
                   f"{FLOOR_S * 1e3:.0f} ms){rate}",
                   f"Check the transfer path before the servers: the backend ({backend}), the RDMA devices "
                   "(--disaggregation-ib-device), a link another job shares. The decode servers' ITL is not "
                   "the cause: their steps start after the KV arrives.", {})


def rule_pd_transfer_failures(ev: Evidence) -> Finding | None:
    """KV handshakes or transfers fail: the requests are aborted (clients see errors)."""
    if _mode(ev) is None:
        return None
    fails = {k: v for k in FAIL_KEYS if (v := ev.series.get(k)) is not None and v.size and float(np.max(v)) > 0}
    if not fails:
        return None
    words = ", ".join(f"{'transfers' if k == sk.METRICS_TRANSFER_FAILED_PER_S else 'handshakes'} failed in "
                      f"{int(np.count_nonzero(v))} of {v.size} windows" for k, v in fails.items())
    return Finding("pd_transfer_failures", "KV transfers between prefill and decode fail",
                   f"{_mode(ev)} server: {words}",
                   "Read the Events for `Decode transfer failed` / `Prefill transfer failed` and the peer it names; "
                   "a peer that died or a timeout (SGLANG_DISAGGREGATION_WAITING_TIMEOUT, "
                   "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT) is the usual cause.", {})


RULES = (rule_pd_transfer_slow, rule_pd_transfer_failures)


def checked(ev: Evidence) -> list[str]:
    """The PD rules' readings, for a prefill or decode server."""
    if _mode(ev) is None:
        return []
    got = _share(ev)
    return [f"PD ({_mode(ev)}): the KV transfer takes {got[0] * 1e3:.0f} ms of {got[1] * 1e3:.0f} ms TTFT "
            f"(fires at {SHARE * 100:.0f} % and {FLOOR_S * 1e3:.0f} ms)." if got
            else f"PD ({_mode(ev)}): no transfer and TTFT figures in the window."]
