"""The doctor (dashboard/services/doctor.py) and SGLang's rules (collectors/sglang/doctor_rules.py)
on recorded figures: each fires on the evidence it names and stays quiet on a healthy window; `gather` reads a real SQLite file."""

from __future__ import annotations

import time

import numpy as np
import pytest

from collectors.sglang import doctor_rules as rules
from dashboard.services import doctor
from dashboard.services.doctor import Evidence
from storage import repo

HOUR = 3600.0


def ev(**series: list[float]) -> Evidence:
    e = Evidence(since=0.0, until=HOUR)
    e.series = {k.replace("__", "."): np.asarray(v, dtype=float) for k, v in series.items()}
    return e


def test_too_conservative_fires_when_requests_wait_with_free_kv() -> None:
    e = ev(log__queue_req=[5, 8, 0, 12, 9, 7], log__token_usage=[0.4, 0.5, 0.45, 0.5, 0.42, 0.48])
    e.server_args = {"schedule_conservativeness": 1.0, "max_running_requests": 64}
    f = rules.rule_too_conservative(e)
    assert f is not None and f.flags == {"schedule-conservativeness": 0.3, "max-running-requests": 128}
    assert "83 % of 6 samples" in f.evidence and "p50 is 0.46" in f.evidence


def test_too_conservative_quiet_when_the_queue_is_empty_or_kv_full() -> None:
    assert rules.rule_too_conservative(ev(log__queue_req=[0] * 6, log__token_usage=[0.4] * 6)) is None
    assert rules.rule_too_conservative(ev(log__queue_req=[9] * 6, log__token_usage=[0.95] * 6)) is None


def test_retractions_fire_above_one_a_minute_at_high_usage() -> None:
    e = ev(log__token_usage=[0.95, 0.97, 0.93])
    e.events = {"decode_retract": 120}
    e.server_args = {"schedule_conservativeness": 1.0}
    f = rules.rule_retractions(e)
    assert f is not None and f.flags == {"schedule-conservativeness": 1.3} and "2.0/min" in f.evidence
    e.events = {"decode_retract": 30}  # 0.5 a minute
    assert rules.rule_retractions(e) is None


def test_prefill_oom_halves_the_chunk_and_lowers_the_fraction() -> None:
    e = ev()
    e.events = {"prefill_oom": 2}
    e.server_args = {"chunked_prefill_size": 8192, "mem_fraction_static": 0.9}
    f = rules.rule_prefill_oom(e)
    assert f is not None and f.flags == {"chunked-prefill-size": 4096, "mem-fraction-static": 0.85}
    e.events = {"decode_retract": 2}
    assert rules.rule_prefill_oom(e) is None


def test_gpu_headroom_under_five_gib() -> None:
    e = ev()
    e.server_args = {"mem_fraction_static": 0.9}
    e.gpu_free_bytes = [20 * rules.GIB, 3 * rules.GIB]
    f = rules.rule_gpu_headroom(e)
    assert f is not None and f.flags == {"mem-fraction-static": 0.85} and "3.0 GiB" in f.evidence
    e.gpu_free_bytes = [12 * rules.GIB]
    assert rules.rule_gpu_headroom(e) is None


def test_radix_hit_rate_low_only_matters_on_a_shared_prefix_workload() -> None:
    e = ev(log__cache_hit_rate=[0.0, 0.05, 0.02])
    e.server_args = {"disable_radix_cache": True, "schedule_policy": "fcfs"}
    e.prompt_set = "shared-prefix"
    f = rules.rule_radix_hit(e)
    assert f is not None and f.flags == {"schedule-policy": "lpm", "disable-radix-cache": False}
    e.prompt_set = "builtin"
    assert rules.rule_radix_hit(e) is None
    e.prompt_set, e.series["log.cache_hit_rate"] = "shared-prefix", np.asarray([0.8, 0.9])
    assert rules.rule_radix_hit(e) is None


def test_cuda_graph_batch_above_its_max() -> None:
    e = ev(log__running_req=[100, 120, 130, 140, 150])
    e.server_args = {"cuda_graph_max_bs": 64}
    f = rules.rule_cuda_graph(e)
    assert f is not None and f.flags == {"cuda-graph-max-bs": 256}
    e.series["log.running_req"] = np.asarray([10, 20, 30])
    assert rules.rule_cuda_graph(e) is None


def test_speculation_that_keeps_too_few_drafts_is_named() -> None:
    e = ev(log__accept_len=[1.2, 1.3, 1.25, 1.4, 1.1, 1.3])
    e.server_args = {"speculative_algorithm": "NGRAM", "speculative_num_steps": 3, "speculative_num_draft_tokens": 4}
    f = rules.rule_speculation_does_not_pay(e)
    assert f is not None and f.rule == "speculation_does_not_pay"
    assert "NGRAM: accept length p50 1.27 tokens a step over 6 samples (< 1.5)" in f.evidence
    assert "each verify checking 4 positions a request after 3 draft steps" in f.evidence
    assert f.flags == {"speculative-num-steps": 1, "speculative-num-draft-tokens": 2}
    assert "accept length p50 1.27 tokens a step (fires under 1.5)" in "\n".join(doctor.checked(e))
    # from /metrics when the log has none; quiet when drafts pay, or without speculation
    e.series = {"metrics.spec_accept_length": np.asarray([3.1, 2.9, 3.0, 3.2, 2.8])}
    assert rules.rule_speculation_does_not_pay(e) is None
    e.series["metrics.spec_accept_length"] = np.asarray([1.0] * 5)
    assert rules.rule_speculation_does_not_pay(e) is not None
    e.server_args = {}
    assert rules.rule_speculation_does_not_pay(e) is None
    assert not any("Speculative" in line for line in doctor.checked(e))


def test_hicache_rules_name_a_full_host_pool_and_load_back_slower_than_recompute() -> None:
    from collectors.sglang import doctor_hicache as hicache

    hi = {"enable_hierarchical_cache": True, "hicache_ratio": 2.0, "hicache_size": 0, "hicache_io_backend": "kernel"}
    e = ev(metrics__hicache_host_used_tokens=[9700, 9800, 9900, 9900, 9950],
           metrics__hicache_host_total_tokens=[10000] * 5)
    e.server_args = hi
    f = hicache.rule_hicache_host_full(e)
    assert f is not None and f.rule == "hicache_host_full" and f.flags == {"hicache-ratio": 4.0}
    assert "host pool 99 % full (median over 5 samples, fires at 95 %)" in f.evidence
    e.server_args = {**hi, "hicache_size": 64}  # the size (GB) overrides the ratio: it is what to raise
    assert hicache.rule_hicache_host_full(e).flags == {"hicache-size": 128}  # type: ignore[union-attr]
    e.server_args = hi
    e.series["metrics.hicache_host_used_tokens"] = np.asarray([5000.0] * 5)
    assert hicache.rule_hicache_host_full(e) is None
    # 8 µs to load a token back against 20 µs to recompute one (50,000 tok/s): host hits pay
    e.series.update({"metrics.load_back_s_per_token": np.asarray([8e-6] * 5),
                     "log.input_throughput_tok_s": np.asarray([50_000.0, 0.0, 50_000.0, 50_000.0, 50_000.0, 50_000.0])})
    assert hicache.rule_hicache_load_back_slow(e) is None
    e.series["metrics.load_back_s_per_token"] = np.asarray([40e-6] * 5)
    slow = hicache.rule_hicache_load_back_slow(e)
    assert slow is not None and "takes 40.0 µs (p50 over 5 samples), recomputing one at most 20.0 µs" in slow.evidence
    said = "\n".join(doctor.checked(e))
    assert "HiCache host pool: 50 % full" in said and "HiCache load-back: 40.0 µs a token" in said
    e.server_args = {}  # without HiCache neither rule reads anything
    assert hicache.rule_hicache_host_full(e) is None and hicache.rule_hicache_load_back_slow(e) is None
    assert not any("HiCache" in line for line in doctor.checked(e))


def test_gpu_underfed_fires_on_the_gpu_walls_neither_verdict(engine) -> None:
    """The H200's idle recording stored with requests running: the GPU wall says "neither", and
    the doctor names it; the copy loop (bandwidth bound) raises nothing."""
    from gpu_seed import store_recording

    t0 = time.time() - 30
    srv = repo.upsert_server(engine, name="h200", base_url="http://127.0.0.1:1", managed=True)
    store_recording(engine, "nvml-h200-idle.json", queue=4, t0=t0, server_id=srv.id)
    got = doctor.gather(engine, "h200", since=t0 - 1, until=t0 + 60)
    got.server_args = {"max_running_requests": 16}
    [f] = [f for f in doctor.diagnose(got) if f.rule == "gpu_underfed"]
    assert "GPU 0 (NVIDIA H200)" in f.evidence and f.flags == {"max-running-requests": 32}
    other = repo.upsert_server(engine, name="busy", base_url="http://127.0.0.1:2", managed=True)
    store_recording(engine, "nvml-h200-copy.json", queue=4, t0=t0, server_id=other.id)
    busy = doctor.gather(engine, "busy", since=t0 - 1, until=t0 + 60)
    assert busy.gpu_walls[0]["verdict"] == "bandwidth" and rules.rule_gpu_underfed(busy) is None


def test_a_gpu_idle_for_want_of_requests_is_not_called_underfed(engine) -> None:
    """Eager batch-1 decode on an H100 (kernels 31 % of the time): the GPU wall says "neither"
    (it waits on the host) whether or not requests were queued, but only with requests running
    is the doctor's advice (bigger batches) right."""
    from gpu_seed import store_recording

    t0 = time.time() - 30
    for name, queue in (("quiet", None), ("loaded", 1)):
        srv = repo.upsert_server(engine, name=name, base_url=f"http://{name}:1", managed=True)
        store_recording(engine, "gpu-kernels/nvml-h100-llm-decode-eager.json", queue=queue, t0=t0,
                        server_id=srv.id)
    quiet = doctor.gather(engine, "quiet", since=t0 - 1, until=t0 + 60)
    assert quiet.gpu_walls[0]["verdict"] == "neither" and quiet.gpu_walls[0]["neither_queued_share"] == 0.0
    assert rules.rule_gpu_underfed(quiet) is None
    loaded = doctor.gather(engine, "loaded", since=t0 - 1, until=t0 + 60)
    f = rules.rule_gpu_underfed(loaded)
    assert f is not None and "near neither wall in 100 %" in f.evidence


@pytest.mark.parametrize("seeded", [True, False])
def test_gather_reads_a_window_from_storage(engine, seeded) -> None:
    now = time.time()
    srv = repo.upsert_server(engine, name="s", base_url="http://127.0.0.1:1", managed=True)
    if seeded:
        with engine.begin() as conn:
            repo.insert_samples(conn, rows=[
                {"ts": now - 60 + i, "server_id": srv.id, "metric": m, "value": v, "source": "log"}
                for i in range(10) for m, v in (("log.queue_req", 6.0), ("log.token_usage", 0.4),
                                                 ("gpu.0.mem_total_bytes", 80 * rules.GIB),
                                                 ("gpu.0.mem_used_bytes", 78 * rules.GIB))])
    got = doctor.gather(engine, "s", since=now - 600, until=now + 1)
    names = {f.rule for f in doctor.diagnose(got)}
    assert names == ({"too_conservative", "gpu_headroom"} if seeded else set())


def test_a_finding_becomes_a_candidate_profile_derived_from_the_running_one(engine, tmp_path) -> None:
    import tomllib

    from dashboard.services.tune import TuneRequestError, parse_grid
    from launching.profiles import sync_profiles

    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "base.toml").write_text('name = "base"\nmodel_path = "m"\nentrypoint = "simulator.launch_server"\n'
                                      '[flags]\nmax-running-requests = 64\ndisable-radix-cache = true\n'
                                      '[env]\nSGLANG_SIM_SPEED = "50"\n')
    assert sync_profiles(engine, folder)[1] == []
    repo.upsert_server(engine, name="s", base_url="http://127.0.0.1:1", managed=True, profile="base")
    finding = doctor.Finding("radix_hit", "t", "e", "s", {"schedule-policy": "lpm", "disable-radix-cache": False})
    mine = tmp_path / "data" / "profiles"
    name = doctor.make_candidate(engine, folder, mine, "s", finding)
    assert not (folder / f"{name}.toml").exists()  # never beside the base (the source tree)
    data = tomllib.loads((mine / f"{name}.toml").read_text())
    assert data["flags"] == {"max-running-requests": 64, "disable-radix-cache": False, "schedule-policy": "lpm"}
    assert data["env"] == {"SGLANG_SIM_SPEED": "50"} and repo.get_profile(engine, name=name) is not None
    assert len(parse_grid("max-running-requests=2,4;schedule-policy=fcfs,lpm")) == 4
    with pytest.raises(TuneRequestError, match="flag=v1,v2"):
        parse_grid("max-running-requests")


def test_image_steps_near_neither_wall_are_far_slower_than_the_card_allows(engine) -> None:
    """DenoisingStage timings laid over the H200's idle recording (requests running): the stage ran
    near neither wall, and the doctor says so; over the matmul loop (held by the power cap) it is at
    a wall: quiet."""
    from gpu_seed import store_recording

    t0 = time.time() - 30
    for name, fixture in (("img-idle", "nvml-h200-idle.json"), ("img-busy", "nvml-h200-matmul-gpm.json")):
        srv = repo.upsert_server(engine, name=name, base_url=f"http://{name}:1", managed=True, kind="image")
        store_recording(engine, fixture, queue=1, t0=t0, server_id=srv.id)
        with engine.begin() as conn:
            repo.insert_samples(conn, rows=[
                {"ts": t0 + 11, "server_id": srv.id, "source": "log", "metric": m, "value": v}
                for m, v in (("log.diffusion.stage_s.DenoisingStage", 8.0), ("log.diffusion.step_s", 0.4))])
    idle = doctor.gather(engine, "img-idle", since=t0 - 1, until=t0 + 60)
    [f] = [f for f in doctor.diagnose(idle) if f.rule == "image_step_underfed"]
    assert "DenoisingStage ran near neither wall" in f.evidence and f.flags == {"enable-torch-compile": True}
    busy = doctor.gather(engine, "img-busy", since=t0 - 1, until=t0 + 60)
    assert busy.stage_walls["power_share"] > 0.8 and rules.rule_image_step_underfed(busy) is None


def test_a_quiet_doctor_shows_what_each_rule_measured() -> None:
    # an idle demo: the queue never waits (0 of 6 samples), usage p50 0.02, radix hit 0.07 on the
    # canary's builtin prompts (not a shared-prefix sweep), 20.5 GiB free, no retractions or OOMs
    e = ev(log__queue_req=[0] * 6, log__token_usage=[0.01, 0.02, 0.02, 0.03, 0.02, 0.02],
           log__cache_hit_rate=[0.07] * 6, log__running_req=[1, 1, 1, 2, 1, 1])
    e.gpu_free_bytes = [20.5 * rules.GIB]
    e.prompt_set = "builtin"
    e.server_args = {"cuda_graph_max_bs": 8}
    assert doctor.diagnose(e) == []
    lines = doctor.checked(e)
    text = "\n".join(lines)
    assert "requests waited in 0 % of 6 samples, token usage p50 0.02" in text
    assert "Decode retractions: 0 in 60 min" in text and "Prefill OOMs: 0" in text
    assert "the fullest GPU has 20.5 GiB free (fires under 5 GiB)" in text
    assert "hit rate 0.07 on a builtin workload (judged only on a shared-prefix sweep" in text
    assert "running requests p90 2 against cuda-graph max bs 8" in text
    # nothing measured reads as not measured, never as a zero
    bare = "\n".join(doctor.checked(ev()))
    assert "on an unknown workload" in bare  # no workload on record: "an", not "a unknown"
    assert "no queue or token-usage samples" in bare and "no GPU memory figures" in bare
    assert "hit rate not measured" in bare and "max bs unknown" in bare


def test_the_doctor_runs_the_servers_engines_rules_only(engine, monkeypatch) -> None:
    """The same figures (queue waiting, KV cache free: SGLang's too_conservative) on a server of
    another engine: that engine's own rules judge them (here one rule over its own series), and an
    engine without tuning rules gets no finding and says so."""
    import dataclasses

    import toy_engine

    from collectors.engines import ENGINES
    from collectors.tuning import Finding, TuningRules

    def busy(e: Evidence) -> Finding | None:
        served = e.first(("log.toy_served",))
        return Finding("toy_busy", "Toy is busy", f"{served.size} samples", "Relax.", {}) if served.size else None

    ruled = dataclasses.replace(toy_engine.ENGINE, name="toyr", display_name="Toy R",
                                tuning_rules=TuningRules(series=("log.toy_served",), rules=(busy,),
                                                         checked=lambda e: ["Busy: judged."]))
    monkeypatch.setitem(ENGINES, "toy", toy_engine.ENGINE)
    monkeypatch.setitem(ENGINES, "toyr", ruled)
    now = time.time()
    for name in ("toy", "toyr", "sg"):
        srv = repo.upsert_server(engine, name=name, base_url=f"http://{name}:1", managed=True,
                                 **({"engine": name} if name != "sg" else {}))
        with engine.begin() as conn:
            repo.insert_samples(conn, rows=[
                {"ts": now - 60 + i, "server_id": srv.id, "metric": m, "value": v, "source": "log"}
                for i in range(10) for m, v in (("log.queue_req", 6.0), ("log.token_usage", 0.4),
                                                 ("log.toy_served", 1.0))])
    sg = doctor.gather(engine, "sg", since=now - 600, until=now + 1)
    assert {f.rule for f in doctor.diagnose(sg)} == {"too_conservative"}
    assert doctor.guidance(sg) == "SGLang's tuning guidance"
    toy = doctor.gather(engine, "toy", since=now - 600, until=now + 1)
    assert doctor.diagnose(toy) == [] and doctor.checked(toy) == ["Toy has no tuning rules."]
    assert doctor.guidance(toy) == "Toy's tuning guidance"
    toyr = doctor.gather(engine, "toyr", since=now - 600, until=now + 1)
    assert [f.rule for f in doctor.diagnose(toyr)] == ["toy_busy"] and doctor.checked(toyr) == ["Busy: judged."]
    assert set(toyr.series) == {"log.toy_served"}  # only the series its rules read


def test_pd_rules_name_a_slow_kv_transfer_and_failed_transfers() -> None:
    from collectors.sglang import doctor_pd as pd

    # a prefill server: its TTFT (it answers once the KV is sent) is mostly the transfer
    e = ev(metrics__kv_transfer_latency_mean_s=[0.40, 0.45, 0.50], metrics__ttft_mean_s=[0.60, 0.62, 0.65],
           metrics__kv_transfer_speed_p50_bytes_s=[2 * 2 ** 30] * 3)
    e.server_args = {"disaggregation_mode": "prefill", "disaggregation_transfer_backend": "mooncake"}
    f = pd.rule_pd_transfer_slow(e)
    assert f is not None and f.rule == "pd_transfer_slow"
    assert "the KV transfer takes 450 ms of a 620 ms time to first token (73 %" in f.evidence
    assert "2.0 GiB/s" in f.evidence and "mooncake" in f.suggestion
    e.series["metrics.kv_transfer_latency_mean_s"] = np.asarray([0.004] * 3)  # 4 ms: no finding
    assert pd.rule_pd_transfer_slow(e) is None
    e.series["metrics.kv_transfer_latency_mean_s"] = np.asarray([0.1] * 3)  # 16 % of 620 ms: no finding
    assert pd.rule_pd_transfer_slow(e) is None
    # a decode server reads its own wait for the KV
    d = ev(**{"metrics__stage_latency_mean_s.decode_transferred": [0.5] * 3, "metrics__ttft_mean_s": [0.7] * 3})
    d.server_args = {"disaggregation_mode": "decode"}
    slow = pd.rule_pd_transfer_slow(d)
    assert slow is not None and "waiting for the KV cache from prefill takes 500 ms of a 700 ms" in slow.evidence
    assert pd.rule_pd_transfer_failures(d) is None
    d.series["metrics.transfer_failed_per_s"] = np.asarray([0.0, 0.2, 0.0])
    failed = pd.rule_pd_transfer_failures(d)
    assert failed is not None and "transfers failed in 1 of 3 windows" in failed.evidence
    assert any("PD (decode): the KV transfer takes 500 ms of 700 ms TTFT" in x for x in doctor.checked(d))
    d.server_args = {"disaggregation_mode": "null"}  # a whole server: neither rule reads anything
    assert pd.rule_pd_transfer_slow(d) is None and pd.rule_pd_transfer_failures(d) is None
    assert not any(x.startswith("PD") for x in doctor.checked(d))
