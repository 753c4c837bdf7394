"""Scorecards built from a seeded database: every dimension against hand-computed figures.

The world (conftest.seed_alpha): 2 GPUs at $2/GPU-h; probe run at concurrency 4 with one
warm-up request (ttft 5 s, must be ignored), four ok requests starting at T0+0, +1, +2, +3
(ttft 0.1/0.2/0.3/0.4 s, e2e 1 s, 50 tokens in, 100 out, itl [10, 20, 30] ms) and one timeout;
samples and events in the run window [T0-1, T0+5).
"""

from __future__ import annotations

import pytest
from scorecard_seed import T0, seed_alpha, seed_canary_only

from scorecard.build import ScorecardError, build_scorecard
from scorecard.compute import ScorecardInputs, compute_scorecard
from scorecard.metric_specs import METRIC_SPECS
from scorecard.slo import resolve
from storage import repo


@pytest.fixture
def alpha(engine) -> dict[str, int]:
    return seed_alpha(engine)


@pytest.fixture
def card(engine, alpha):
    return build_scorecard(engine, run_id=alpha["run_id"], settings_slo={"ttft_p99_s": 0.5},
                           electricity_usd_per_kwh=0.15)


def v(card, key):
    return card.figures[key].value


def test_every_spec_has_a_figure(card):
    assert set(card.figures) == {s.key for s in METRIC_SPECS}


def test_latency_exact_from_probe_requests(card):
    # ok ttft [0.1, 0.2, 0.3, 0.4] (the 5 s warm-up excluded): p50 0.25, p95 0.385, p99 0.397
    assert v(card, "ttft_p50_s") == pytest.approx(0.25)
    assert v(card, "ttft_p95_s") == pytest.approx(0.385)
    assert v(card, "ttft_p99_s") == pytest.approx(0.397)
    # itl pooled: 4 x [0.01, 0.02, 0.03] -> p50 0.02
    assert v(card, "itl_p50_s") == pytest.approx(0.02)
    assert v(card, "tpot_p50_s") == pytest.approx(0.009)
    assert v(card, "e2e_p99_s") == pytest.approx(1.0)
    assert card.subject["latency_source"] == "probe"
    assert card.figures["image_p50_s"].status == "not_applicable"


def test_server_histogram_estimate_flags_clamp(card):
    # metrics.ttft_p99_s 0.5 and 0.7 -> mean 0.6; metrics.ttft_clamped hit 1 -> flagged
    fig = card.figures["server_ttft_p99_s"]
    assert fig.value == pytest.approx(0.6)
    assert fig.flagged and "clamped" in fig.note
    assert card.figures["server_itl_p99_s"].status == "missing"


def test_throughput(card):
    # 4 ok in the 4 s level window (T0 -> T0+4): 1 req/s, 400/4 = 100 out tok/s, 200/4 = 50 in
    assert v(card, "rps") == pytest.approx(1.0)
    assert v(card, "output_tok_s") == pytest.approx(100.0)
    assert v(card, "input_tok_s") == pytest.approx(50.0)
    # log.gen_throughput 90, 110 -> 100; running 2, 4 -> 3 (the 99 at T0+50 is outside)
    assert v(card, "server_gen_tok_s") == pytest.approx(100.0)
    assert v(card, "avg_running_batch") == pytest.approx(3.0)
    # (60 + 20) cached / (80 + 20) = 0.8 from the scheduler log, not the client's 25/50
    assert v(card, "radix_hit_rate") == pytest.approx(0.8)
    assert card.figures["images_per_min"].status == "not_applicable"


def test_cost(card):
    # $2 x 2 GPUs = $4/h; $4/3600 / 100 tok/s * 1e6 = $11.111 per 1M output tokens;
    # / 150 tok/s -> $7.407 per 1M total; / 1 req/s * 1000 -> $1.111 per 1,000 requests
    assert v(card, "gpu_usd_per_hour") == pytest.approx(4.0)
    assert v(card, "usd_per_1m_output_tok") == pytest.approx(11.1111, rel=1e-4)
    assert v(card, "usd_per_1m_total_tok") == pytest.approx(7.40741, rel=1e-4)
    assert v(card, "usd_per_1k_requests") == pytest.approx(1.11111, rel=1e-4)
    # the only level has TTFT p99 0.397 <= 0.5: cost at target = $11.111, naming the level
    at = card.figures["usd_per_1m_output_tok_at_slo"]
    assert at.value == pytest.approx(11.1111, rel=1e-4) and "level 4" in at.note
    # energy: (1600-1000) + (900-500) = 1000 J over the 6 s run window = 166.7 W;
    # 500 tokens out (4 ok x 100 + the ok warm-up's 100) -> 2 J/token;
    # 2 J * 1e6 / 3.6e6 * $0.15 = $0.0833 per 1M output tokens
    assert v(card, "avg_power_w") == pytest.approx(166.667, rel=1e-4)
    assert v(card, "energy_j_per_output_tok") == pytest.approx(2.0)
    assert v(card, "electricity_usd_per_1m_output_tok") == pytest.approx(0.083333, rel=1e-4)


def test_stability(card):
    # 5 measured requests, 1 timeout: 4/5 = 0.8; oom + prefill_oom = 2; 3 retractions;
    # the crash at T0+60 is outside the window -> 0; one server_exit
    assert v(card, "success_rate") == pytest.approx(0.8)
    assert card.errors_by_kind == {"timeout": 1}
    assert v(card, "error_count") == 1
    assert v(card, "oom_count") == 2
    assert v(card, "retraction_count") == 3
    assert v(card, "crash_count") == 0
    assert v(card, "restart_count") == 1
    # queue 0 @T0, 20 @T0+1, 5 @T0+3: max 20, above 16 for 2 s
    assert v(card, "queue_max") == 20
    assert v(card, "queue_above_threshold_s") == pytest.approx(2.0)
    # 0.397 / 0.25
    assert v(card, "ttft_p99_p50_ratio") == pytest.approx(1.588)
    # health 1 1 0 1: one flap (and one health_down event)
    assert v(card, "health_flaps") == 1


def test_grades_and_reasons(card):
    # TTFT p99 0.397 <= 0.5: latency passes; success 0.8 < warn 0.95 and 2 OOMs: stability fails
    assert card.figures["ttft_p99_s"].grade == "pass"
    assert card.dimensions["latency"].grade == "pass"
    assert card.dimensions["stability"].grade == "fail"
    assert card.dimensions["stability"].reasons[0].endswith("fail")
    assert card.dimensions["throughput"].grade == "none"
    assert "no throughput targets" in card.dimensions["throughput"].reasons[0]


def test_provenance_names_everything(card):
    s, p = card.subject, card.provenance
    assert (s["server"], s["launch_id"], s["profile_name"], s["run_id"]) == (
        "alpha", 1, "prof-alpha", 1)
    assert (s["since"], s["until"]) == (T0 - 1, T0 + 5)
    assert p["fingerprint"] == "fp-a" and p["fingerprint_detail"]["prompt_set"] == "shared-prefix"
    assert p["sglang_version"] == "0.5.23" and p["server_args"]["tp_size"] == 2
    assert p["self_check"]["trusted"] is True and p["self_check"]["client_cpu_pct"] == 12.0
    assert p["gpu_model"] == "unknown" and p["gpu_driver"] == "unknown"


def test_gpu_model_from_collector_state(engine, alpha):
    with engine.begin() as conn:
        repo.save_state(conn, key=f"gpu:{alpha['server_id']}:info",
                        value={"gpus": [{"name": "NVIDIA H200", "driver": "570.1"}]})
    card = build_scorecard(engine, run_id=alpha["run_id"])
    assert (card.provenance["gpu_model"], card.provenance["gpu_driver"]) == ("NVIDIA H200",
                                                                              "570.1")


def test_no_price_is_not_configured_never_zero(engine):
    ids = seed_alpha(engine, price=None)
    card = build_scorecard(engine, run_id=ids["run_id"])
    for key in ("gpu_usd_per_hour", "usd_per_1m_output_tok", "usd_per_1m_total_tok",
                "usd_per_1k_requests", "usd_per_1m_output_tok_at_slo",
                "electricity_usd_per_1m_output_tok"):
        fig = card.figures[key]
        assert fig.status == "not_configured" and fig.value is None, key
        assert "not configured" in fig.note
    assert "gpu_hourly_usd" in card.figures["usd_per_1m_output_tok"].note
    # energy needs no price
    assert v(card, "energy_j_per_output_tok") == pytest.approx(2.0)
    assert any("not configured" in r for r in card.dimensions["cost"].reasons)


def test_cost_at_target_default_and_off(engine, alpha):
    # the default TTFT p99 target (1 s) applies: 0.397 s meets it -> $11.111
    card = build_scorecard(engine, run_id=alpha["run_id"])
    assert v(card, "usd_per_1m_output_tok_at_slo") == pytest.approx(11.1111, rel=1e-4)
    assert card.figures["ttft_p99_s"].target == 1.0
    # with the target switched off there is no latency target to price: not configured
    card = build_scorecard(engine, run_id=alpha["run_id"], settings_slo={"ttft_p99_s": "off"})
    fig = card.figures["usd_per_1m_output_tok_at_slo"]
    assert fig.status == "not_configured" and "ttft_p99_s" in fig.note
    assert card.figures["ttft_p99_s"].grade == "none"


def test_canary_only_latency_is_labelled(engine):
    seed_canary_only(engine)
    card = build_scorecard(engine, server="beta", since_s=10, now=T0 + 5)
    # canary ttft [0.1, 0.2, 0.3]: p50 0.2; e2e [0.5, 0.6, 0.9]: p99 at index 1.98 ->
    # 0.6 + 0.98 * 0.3 = 0.894
    assert card.subject["latency_source"] == "canary only"
    assert v(card, "ttft_p50_s") == pytest.approx(0.2)
    assert v(card, "e2e_p99_s") == pytest.approx(0.894)
    assert card.figures["ttft_p50_s"].source == "canary"
    assert card.figures["ttft_p50_s"].note == "canary only"
    assert card.figures["itl_p50_s"].value is None
    assert any("canary only" in n for n in card.notes)
    # canary ok 1 1 0 1 -> 3/4
    assert v(card, "success_rate") == pytest.approx(0.75)
    assert card.figures["usd_per_1m_output_tok"].status == "not_configured"


def test_window_without_anything_is_missing_not_zero(engine):
    repo.upsert_server(engine, name="empty", base_url="http://127.0.0.1:3")
    card = build_scorecard(engine, server="empty", since_s=60, now=T0)
    assert card.subject["latency_source"] == "none"
    assert v(card, "ttft_p99_s") is None and v(card, "rps") is None
    assert card.figures["queue_max"].status == "missing"
    assert v(card, "oom_count") == 0  # no events in the window is a real zero


def test_window_scorecard_finds_the_probe_run_inside(engine, alpha):
    card = build_scorecard(engine, server="alpha", since_s=30, now=T0 + 10)
    assert card.subject["run_id"] == alpha["run_id"]
    assert v(card, "ttft_p50_s") == pytest.approx(0.25)


def test_unknown_subjects_are_one_sentence(engine, alpha):
    with pytest.raises(ScorecardError, match="does not exist"):
        build_scorecard(engine, run_id=999)
    with pytest.raises(ScorecardError, match="not known"):
        build_scorecard(engine, server="nope", since_s=60)
    with pytest.raises(ScorecardError, match="no level 7"):
        build_scorecard(engine, run_id=alpha["run_id"], level=7)


def test_image_server_per_image_latency_and_cost():
    import pandas as pd

    # 3 ok image requests of 2 images each, e2e 4, 6, 8 s, starting at 0, 2, 4 -> window 0..12 s
    # per-image latency = e2e / 2 -> [2, 3, 4]: p50 3 s; images 6 in 12 s = 30 img/min;
    # $3/h / 60 / 30 img/min = $0.001667 per image
    rows = pd.DataFrame([
        {"level": 1.0, "warmup": False, "ok": True, "start_ts": s, "ttft_s": None, "e2e_s": e,
         "itl_s": None, "tpot_s": None, "tokens_in": None, "tokens_out": None,
         "tokens_cached": None, "error_kind": None}
        for s, e in ((0.0, 4.0), (2.0, 6.0), (4.0, 8.0))])
    inp = ScorecardInputs(subject={"server": "img", "run_id": 1, "since": 0.0, "until": 12.0},
                          provenance={}, kind="image", gpu_hourly_usd=3.0, gpu_count=1,
                          gpu_count_note="gpu_indices", probe_requests=rows,
                          images_per_request=2, energy_j=600.0)
    card = compute_scorecard(inp, resolve(None, {}))
    assert v(card, "image_p50_s") == pytest.approx(3.0)
    assert v(card, "images_per_min") == pytest.approx(30.0)
    assert v(card, "usd_per_image") == pytest.approx(3 / 60 / 30)
    # 600 J / 6 images = 100 J per image
    assert v(card, "energy_j_per_image") == pytest.approx(100.0)
    assert card.figures["ttft_p50_s"].status == "not_applicable"
    assert card.figures["usd_per_1m_output_tok"].status == "not_applicable"


def test_radix_hit_rate_fallbacks():
    base = {"subject": {"server": "s", "since": 0.0, "until": 10.0}, "provenance": {}}
    slo_set = resolve(None, {})
    # /metrics counter rates: mean cached 30 tok/s over mean prompt 120 tok/s = 0.25
    inp = ScorecardInputs(**base, means={"metrics.cached_tokens_per_s": 30.0,
                                         "metrics.prompt_tokens_per_s": 120.0})
    fig = compute_scorecard(inp, slo_set).figures["radix_hit_rate"]
    assert fig.value == pytest.approx(0.25) and "/metrics" in fig.note
    # nothing at all: missing, never 0
    fig = compute_scorecard(ScorecardInputs(**base), slo_set).figures["radix_hit_rate"]
    assert fig.value is None and fig.status == "missing"


def test_radix_hits_by_tier_weigh_every_scrape_of_the_window(engine):
    """HiCache's host tier shows from its first hit: 10 scrapes of 100 prompt tok/s, host hits of
    50 tok/s in the last 5 only. The host share is 250 / 1,000 = 25 % (a mean over the host's
    own samples would say 50 %); the device's 70 tok/s in all 10 is 70 %; no storage tier: not
    applicable."""
    srv = repo.upsert_server(engine, name="hicache", base_url="http://127.0.0.1:5")
    rows = [{"ts": T0 - 100 + 10 * k, "server_id": srv.id, "metric": m, "value": v, "source": "metrics"}
            for k in range(10) for m, v in (("metrics.prompt_tokens_per_s", 100.0),
                                            ("metrics.cache_hit_tokens_per_s.device", 70.0))]
    rows += [{"ts": T0 - 50 + 10 * k, "server_id": srv.id, "metric": "metrics.cache_hit_tokens_per_s.host",
              "value": 50.0, "source": "metrics"} for k in range(5)]
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=rows)
    figs = build_scorecard(engine, server="hicache", since_s=105, now=T0).figures
    assert figs["radix_hit_rate_host"].value == pytest.approx(0.25)
    assert figs["radix_hit_rate_device"].value == pytest.approx(0.70)
    assert figs["radix_hit_rate_storage"].value is None and figs["radix_hit_rate_storage"].status == "not_applicable"


def test_log_only_energy_per_token_excludes_idle_time(engine):
    """No /metrics: SGLang's decode lines (log.gen_throughput_tok_s) every 2 s for 20 s, then 100 s
    idle, then 20 s more; the GPU draws 400 W busy and 100 W idle. Tokens are the lines' rate x the
    time they cover (idle credited nothing) and energy is counted over the same time: 1 J/token,
    where the window's mean rate x the whole window gave idle time tokens and its energy."""
    srv = repo.upsert_server(engine, name="logonly", base_url="http://127.0.0.1:4")
    t0 = T0 - 140
    busy = [t0 + 2 * k for k in range(11)] + [t0 + 120 + 2 * k for k in range(11)]
    rows = [{"ts": t, "server_id": srv.id, "metric": "log.gen_throughput_tok_s", "value": 400.0, "source": "log"}
            for t in busy]
    energy, last = 0.0, t0
    for t in [t0 + k for k in range(141)]:
        watts = 400.0 if (t <= t0 + 20 or t > t0 + 118) else 100.0  # a line reports the 2 s before it
        energy += watts * (t - last)
        last = t
        rows.append({"ts": t, "server_id": srv.id, "metric": "gpu.0.energy_j", "value": energy, "source": "gpu"})
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=rows)
    card = build_scorecard(engine, server="logonly", since_s=141, now=T0 + 0.5)
    assert v(card, "energy_j_per_output_tok") == pytest.approx(1.0, rel=0.02)
    assert v(card, "avg_power_w") == pytest.approx(400.0, rel=0.02)
    assert "idle time excluded" in card.figures["energy_j_per_output_tok"].note
