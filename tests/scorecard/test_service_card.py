"""The disaggregated service's card (scorecard/service.py): the TTFT split by part, the KV
transfer's share, the joined figures, the router's workers, and "not measured" where no member
measured a part (never 0)."""

from __future__ import annotations

import pytest

from scorecard.service import Member, service_card, unhealthy_workers, worker_member
from storage import series_keys as sk

STAGE = sk.hist_key("stage_latency", "mean") + "."
PREFILL = {STAGE + "prefill_bootstrap": 0.002, sk.hist_key("queue_time", "mean"): 0.001,
           STAGE + "prefill_forward": 0.030, sk.hist_key("kv_transfer_latency", "mean"): 0.250,
           sk.hist_key("kv_transfer_latency", "p99"): 0.400, sk.hist_key("kv_transfer_speed", "p50"): 2.0 * 2 ** 30}
DECODE = {STAGE + "decode_waiting": 0.004, STAGE + "fake_output": 0.0, sk.hist_key("ttft", "mean"): 0.300,
          sk.hist_key("itl", "p99"): 0.012, sk.METRICS_GENERATION_TOKENS_PER_S: 1000.0}
HEALTH, CB = sk.pattern_prefix(sk.METRICS_ROUTER_WORKER_HEALTH), sk.pattern_prefix(sk.METRICS_ROUTER_WORKER_CB)


def _members(prefill: dict | None = None, decode: dict | None = None, router: dict | None = None) -> list[Member]:
    return [Member("r", "router", "up", values=router or {}, client_ttft_p99_s=0.45),
            Member("p", "prefill", "up", gpus=1, gpu_hourly_usd=3.6, values=PREFILL if prefill is None else prefill),
            Member("d", "decode", "up", gpus=2, gpu_hourly_usd=3.6, values=DECODE if decode is None else decode)]


def test_the_ttft_splits_into_its_parts_and_the_transfer_share_is_named() -> None:
    card = service_card("chat", _members())
    parts = {p.name: p.seconds for p in card.ttft_parts}
    assert parts["KV transfer"] == 0.250 and parts["prefill forward"] == 0.030
    assert parts["decode admission"] == 0.004
    assert parts["other"] == pytest.approx(0.300 - (0.002 + 0.001 + 0.030 + 0.250 + 0.004))
    assert card.transfer_share == pytest.approx(0.250 / 0.300)
    # parts from two servers' windows can add up to more than the decode side's mean: never over 100 %
    short = service_card("chat", _members(decode={**DECODE, sk.hist_key("ttft", "mean"): 0.2}))
    assert short.transfer_share == pytest.approx(0.250 / (0.002 + 0.001 + 0.030 + 0.250 + 0.004))
    f = card.figures
    assert f["client_ttft_p99_s"] == 0.45 and f["itl_p99_s"] == 0.012 and f["kv_transfer_p99_s"] == 0.400
    # three GPUs at 3.60 USD an hour over 1,000 output tokens a second
    assert f["usd_per_mtok"] == pytest.approx(3 * 3.6 / 3600 / 1000 * 1e6)
    assert f["transfer_failures_per_s"] == 0.0  # transfers ran, no failure counter yet: none failed
    assert card.missing_roles == ()
    assert next(p for p in card.ttft_parts if p.name == "KV transfer").source == "prefill: kv_transfer_latency histogram"


def test_a_failure_both_sides_count_is_counted_once() -> None:
    failed = {sk.METRICS_TRANSFER_FAILED_PER_S: 0.2}
    card = service_card("chat", _members(prefill={**PREFILL, **failed}, decode={**DECODE, **failed}))
    assert card.figures["transfer_failures_per_s"] == 0.2


def test_a_part_no_member_measured_is_none_not_zero() -> None:
    card = service_card("chat", _members(prefill={}, decode={sk.hist_key("ttft", "mean"): 0.3}))
    assert all(p.seconds is None for p in card.ttft_parts)  # no parts: no "other" either
    assert card.transfer_share is None
    assert card.figures["kv_transfer_p50_s"] is None and card.figures["transfer_failures_per_s"] is None
    assert card.figures["usd_per_mtok"] is None  # no output measured


def test_a_member_without_a_price_leaves_the_cost_unsaid_and_a_missing_role_is_named() -> None:
    members = _members()
    members[1] = Member("p", "prefill", "up", gpus=1, gpu_hourly_usd=None, values=PREFILL)
    assert service_card("chat", members).figures["usd_per_mtok"] is None
    assert service_card("chat", [members[0], members[2]]).missing_roles == ("prefill",)


def test_the_routers_workers_and_the_unhealthy_ones() -> None:
    router = {HEALTH + "http://10.0.0.1:30000": 1.0, CB + "http://10.0.0.1:30000": 0.0,
              HEALTH + "http://10.0.0.2:30000": 1.0, CB + "http://10.0.0.2:30000": 1.0,
              HEALTH + "http://10.0.0.3:30000": -1.0, CB + "http://10.0.0.3:30000": -1.0}  # removed: 0.3.2 keeps it
    card = service_card("chat", _members(router=router))
    assert [w[0] for w in card.workers] == ["http://10.0.0.1:30000", "http://10.0.0.2:30000", "http://10.0.0.3:30000"]
    assert unhealthy_workers(card) == ["http://10.0.0.2:30000"]  # its breaker is open
    members = [*_members(router=router)[:2], Member("d", "decode", "up", base_url="http://10.0.0.2:30000/")]
    card = service_card("chat", members)
    assert worker_member(card, "http://10.0.0.2:30000").name == "d"  # type: ignore[union-attr]
    assert worker_member(card, "http://10.0.0.1:30000") is None
