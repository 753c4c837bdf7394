"""Speculative decoding in the simulator (simulator/speculative.py), as SGLang 0.5.23 reports it:
a step keeps the accepted drafts plus the bonus token, the decode log line carries
`accept len` and `accept rate` after the token usage, the `spec_accept_*` gauges carry the same
figures, and Pitwall reads them from both (the log parser and the /metrics aliases)."""

from __future__ import annotations

import random
from pathlib import Path

import httpx
import pytest
from sim_fixture import running_sim

from collectors.base import ServerTarget
from collectors.promtext import parse_metrics
from collectors.sglang.log_parse import parse_record
from collectors.sglang.metrics import snapshot
from simulator import speculative
from storage import series_keys as sk

ARGS = ["--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--sim-speed", "50", "--enable-metrics",
        "--decode-log-interval", "4", "--sim-seed", "3"]
SPEC = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
        "--speculative-draft-model-path", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"]


def test_a_verify_keeps_the_accepted_prefix_and_reports_sglangs_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = speculative.from_args("eagle3", 3, None)
    assert spec is not None and (spec.algorithm, spec.num_steps, spec.num_draft_tokens) == ("EAGLE3", 3, 4)
    assert speculative.from_args(None, 3, 4) is None
    rng = random.Random(1)
    kept = [spec.accept(rng) for _ in range(400)]
    assert all(0 <= k <= 3 for k in kept) and {0, 3} <= set(kept)
    accept_len, accept_rate = spec.take()
    assert accept_len == pytest.approx(1 + sum(kept) / 400) and accept_rate == pytest.approx(sum(kept) / 1200)
    assert spec.take() is None  # nothing since the last line
    with pytest.raises(ValueError, match="the simulator models EAGLE"):
        speculative.from_args("MEDUSA", None, None)
    monkeypatch.setenv("SGLANG_SIM_SPEC_ACCEPT", "0.3")
    assert speculative.from_args("NGRAM", 2, None).accept_p == 0.3  # type: ignore[union-attr]
    for bad in ("most", "1.5"):
        monkeypatch.setenv("SGLANG_SIM_SPEC_ACCEPT", bad)
        with pytest.raises(ValueError, match=f"SGLANG_SIM_SPEC_ACCEPT={bad}: expected a share between 0 and 1"):
            speculative.from_args("NGRAM", 2, None)


def _mean_itl(text: str) -> float:
    parsed = parse_metrics(text)
    total = {s.name: s.value for s in parsed.samples if s.name.startswith("sglang:inter_token_latency_seconds_")}
    return total["sglang:inter_token_latency_seconds_sum"] / total["sglang:inter_token_latency_seconds_count"]


def _generate(url: str) -> dict:
    body = {"text": "The quick brown fox " * 20, "sampling_params": {"max_new_tokens": 64, "ignore_eos": True}}
    return httpx.post(f"{url}/generate", json=body, timeout=60).json()["meta_info"]


def test_pitwall_reads_the_accept_length_from_the_log_and_metrics(tmp_path: Path) -> None:
    with running_sim(ARGS + SPEC, tmp_path / "spec.log") as url:
        fast = _generate(url)
        metrics = httpx.get(f"{url}/metrics", timeout=10).text
        info = httpx.get(f"{url}/server_info", timeout=10).json()
    with running_sim(ARGS, tmp_path / "plain.log") as url:
        plain = _generate(url)
        plain_metrics = httpx.get(f"{url}/metrics", timeout=10).text
    assert fast["completion_tokens"] == plain["completion_tokens"] == 64  # never past max_new_tokens
    # the server args as SGLang resolves them (what the doctor reads), and the running average
    assert (info["speculative_algorithm"], info["speculative_num_steps"], info["speculative_num_draft_tokens"],
            info["speculative_eagle_topk"]) == ("EAGLE3", 3, 4, 1)
    assert 1.0 < info["internal_states"][0]["avg_spec_accept_length"] <= 4.0
    # about 3 tokens a step for a small extra cost a step: a far shorter mean ITL (model seconds,
    # from each server's ITL histogram: the decode steps' own cost, whatever the host's load)
    assert _mean_itl(metrics) < 0.7 * _mean_itl(plain_metrics), (_mean_itl(metrics), _mean_itl(plain_metrics))
    lines = [r for line in (tmp_path / "spec.log").read_text().splitlines()
             if (r := parse_record(line)) is not None and r.kind == "decode"]
    assert lines and all("accept_len" in r.fields and "accept_rate" in r.fields for r in lines)
    for r in lines:  # a chain of 3 drafts: accept len = 1 + 3 x accept rate (each printed to 2 places: within 0.005 + 3 x 0.005)
        assert 1.0 <= r.fields["accept_len"] <= 4.0
        assert r.fields["accept_len"] == pytest.approx(1 + 3 * r.fields["accept_rate"], abs=0.03)
    assert not any("accept len" in line for line in (tmp_path / "plain.log").read_text().splitlines())
    rows = snapshot(ServerTarget(id=1, name="sim", base_url=url), parse_metrics(metrics), None, 0.0).rows
    got = {row.metric: row.value for row in rows}
    assert 1.0 < got[sk.METRICS_SPEC_ACCEPT_LENGTH] <= 4.0 and 0.0 < got[sk.METRICS_SPEC_ACCEPT_RATE] <= 1.0
    assert got[sk.METRICS_SPEC_ACCEPT_LENGTH] == pytest.approx(1 + 3 * got[sk.METRICS_SPEC_ACCEPT_RATE])
    assert got["metrics.spec_num_draft_tokens"] == 4
    # the verify forwards: 64 tokens at 1 to 4 a verify (16 to 64 of them), and the warm-up's few
    verify = {s.name: s.value for s in parse_metrics(metrics).samples if s.name == "sglang:spec_verify_calls_total"}
    assert 16 <= verify["sglang:spec_verify_calls_total"] <= 64 + 16, verify
    assert "sglang:spec_verify_calls" not in plain_metrics  # created by the first verify, as a multiprocess registry shows it
