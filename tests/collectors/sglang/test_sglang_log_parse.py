"""Golden tests of the SGLang log grammar, one fixture per version form, plus messy logs.

Fixtures tests/fixtures/sglang-<version>.log are written from the forms SGLang's source of
that version writes (and the diffusion server's prefix); the expected records
below are written by hand from those lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from collectors.sglang.log import parse_line, parse_stream
from collectors.sglang.log_parse import LogRecord
from collectors.sglang.log_stream import ParseStats, parse_text

FIX = Path(__file__).resolve().parents[2] / "fixtures"


def _records(name: str) -> list[tuple[int, str, str | None, dict[str, int], dict[str, Any]]]:
    with open(FIX / name, "rb") as f:
        return [(r.line_no, r.kind, r.timestamp, r.ranks, r.fields) for r in parse_stream(f)]


GOLDEN: dict[str, list[tuple[int, str, str | None, dict[str, int], dict[str, Any]]]] = {
    "sglang-0.1.14.log": [
        (1, "prefill", None, {}, {"new_seq": 1, "cached_token": 5, "new_token": 20,
                                  "queue_req": 0, "running_req": 0, "cache_hit_rate": 20.0}),
        (2, "decode", None, {}, {"running_req": 3, "num_token": 512, "token_usage": 0.01,
                                 "queue_req": 0}),
    ],
    "sglang-0.2.5.log": [
        (1, "prefill", None, {"gpu": 0}, {"new_seq": 1, "new_token": 20, "cached_token": 5,
                                          "cache_hit_rate": 20.0, "running_req": 0,
                                          "queue_req": 0}),
        (2, "decode", None, {"gpu": 0}, {"running_req": 3, "num_token": 512,
                                         "token_usage": 0.01, "gen_throughput": 123.45,
                                         "queue_req": 0}),
    ],
    "sglang-0.2.13.log": [
        (2, "decode", None, {"gpu": 1}, {"running_req": 3, "num_token": 512,
                                         "token_usage": 0.01, "gen_throughput": 123.45,
                                         "queue_req": 2}),
        (3, "server_ready", None, {}, {}),
    ],
    "sglang-0.3.0.log": [
        # mixed chunk: the running count is in the header, #running-req is not a field
        (1, "prefill", "04:40:55", {"tp": 0}, {"new_seq": 1, "new_token": 20, "cached_token": 5,
                                               "cache_hit_rate": 20.0, "queue_req": 0,
                                               "mixed_running_req": 4}),
        (2, "prefill", "04:40:55", {"dp": 1, "tp": 0}, {"new_seq": 1, "new_token": 20,
                                                        "cached_token": 5,
                                                        "cache_hit_rate": 20.0,
                                                        "running_req": 0, "queue_req": 0}),
        (3, "decode", "04:40:56", {"tp": 0}, {"running_req": 5, "num_token": 900,
                                              "token_usage": 0.03, "gen_throughput": 512.0,
                                              "queue_req": 1}),
    ],
    "sglang-0.4.3.log": [
        (1, "prefill", "2025-02-14 10:00:00", {"tp": 0},
         {"new_seq": 2, "new_token": 40, "cached_token": 10, "cache_hit_rate": 20.0,
          "token_usage": 0.02, "running_req": 1, "queue_req": 0}),
        (2, "decode", "2025-02-14 10:00:01", {"tp": 0},
         {"running_req": 3, "num_token": 512, "token_usage": 0.01, "accept_len": 2.5,
          "gen_throughput": 123.45, "queue_req": 0}),
        (3, "decode_retract", "2025-02-14 10:00:02", {"tp": 0},
         {"retracted_req": 3, "new_token_ratio_before": 0.7, "new_token_ratio_after": 0.95}),
    ],
    "sglang-0.4.4.log": [  # trailing ", " after the last field
        (1, "prefill", "2025-03-13 10:00:00", {"tp": 0},
         {"new_seq": 2, "new_token": 40, "cached_token": 10, "token_usage": 0.02,
          "running_req": 1, "queue_req": 0}),
        (2, "decode", "2025-03-13 10:00:01", {"tp": 0},
         {"running_req": 3, "num_token": 512, "token_usage": 0.01, "gen_throughput": 123.45,
          "largest_len": 0, "queue_req": 0}),
    ],
    "sglang-0.4.9.post2.log": [  # the ISO `timestamp:` suffix is not a number: dropped
        (1, "prefill", "2025-07-12 09:31:43", {},
         {"new_seq": 1, "new_token": 20, "cached_token": 5, "num_token": 100,
          "token_usage": 0.0, "running_req": 0, "queue_req": 0}),
        (2, "decode", "2025-07-12 09:31:44", {"dp": 0, "tp": 0},
         {"running_req": 3, "num_token": 512, "token_usage": 0.01, "cuda_graph": True,
          "gen_throughput": 123.45, "queue_req": 0}),
    ],
    "sglang-0.5.4.log": [  # [N] iteration counter; hybrid keys are not token_usage
        (1, "prefill", "2025-10-24 10:00:00", {},
         {"new_seq": 1, "new_token": 20, "cached_token": 5, "full_token_usage": 0.1,
          "mamba_usage": 0.2, "running_req": 0, "queue_req": 0, "iteration": 17}),
        (2, "decode", "2025-10-24 10:00:01", {},
         {"running_req": 3, "num_token": 512, "token_usage": 0.01, "accept_len": 2.5,
          "accept_rate": 0.62, "cuda_graph": True, "gen_throughput": 123.45, "queue_req": 0,
          "iteration": 40}),
    ],
    "sglang-0.5.8.log": [
        (1, "prefill", "2026-01-23 09:31:43", {"dp": 0, "tp": 0, "ep": 0},
         {"new_seq": 1, "new_token": 20, "cached_token": 5, "token_usage": 0.0,
          "running_req": 0, "queue_req": 0}),
        (2, "decode", "2026-01-23 09:31:43", {"dp": 1, "tp": 8, "ep": 8},
         {"running_req": 7, "num_token": 512, "token_usage": 0.03, "cuda_graph": True,
          "gen_throughput": 123.45, "queue_req": 1}),
        (3, "decode", "2026-01-23 09:31:44", {"dp": 0, "tp": 0, "ep": 0},
         {"running_req": 3, "num_token": 500, "token_usage": 0.01, "cuda_graph": True,
          "gen_throughput": 100.0, "queue_req": 2, "iteration": 80}),
    ],
    "sglang-0.5.9.log": [
        (1, "prefill", "2026-02-23 14:05:21.123", {"pp": 1, "tp": 0},
         {"new_seq": 1, "new_token": 20, "cached_token": 5, "token_usage": 0.0,
          "running_req": 0, "queue_req": 0, "input_throughput": 1234.56, "cuda_graph": False}),
        (2, "decode", "2026-02-23 14:05:22.500", {"pp": 1, "tp": 0},
         {"running_req": 3, "num_token": 512, "token_usage": 0.01, "npu_graph": True,
          "gen_throughput": 123.45, "queue_req": 0}),
    ],
    "sglang-0.5.23.log": [
        (2, "server_ready", "2026-10-30 12:00:05", {}, {}),
        (4, "prefill", "2026-10-30 12:00:06", {"tp": 0},
         {"new_seq": 2, "new_token": 300, "cached_token": 100, "token_usage": 0.05,
          "running_req": 4, "queue_req": 1, "pending_token": 600, "cuda_graph": False,
          "input_throughput": 5000.0, "est_prefill_tflops_s_per_gpu": 12.5}),
        (5, "decode", "2026-10-30 12:00:07", {"tp": 0},
         {"running_req": 6, "num_token": 2048, "token_usage": 0.1, "accept_len": 3.2,
          "accept_rate": 0.8, "cuda_graph": True, "gen_throughput": 900.5, "queue_req": 0,
          "fwd_occupancy": 91.5}),
        (6, "prefill", "2026-10-30 12:00:08", {"tp": 0},
         {"new_seq": 1, "new_token": 100, "cached_token": 300, "token_usage": 0.06,
          "running_req": 5, "queue_req": 0, "bootstrap_req": 1, "inflight_req": 2,
          "pending_token": 0, "cuda_graph": False, "input_throughput": 800.0}),
        (7, "decode", "2026-10-30 12:00:09", {"tp": 0},
         {"running_req": 6, "full_token": 1000, "full_token_usage": 0.05, "swa_token": 200,
          "swa_token_usage": 0.3, "prealloc_req": 1, "transfer_req": 0, "retracted_req": 2,
          "cuda_graph": True, "gen_throughput": 700.0, "queue_req": 3}),
        (8, "decode_retract", "2026-10-30 12:00:10", {"tp": 0},
         {"retracted_req": 2, "new_tokens_gained": 812, "new_token_ratio_before": 0.7,
          "new_token_ratio_after": 0.9}),
    ],
    "sglang-0.5.23-diffusion.log": [
        (2, "server_ready", "10-30 12:00:05", {}, {}),
    ],
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_versions(name: str) -> None:
    assert _records(name) == GOLDEN[name]


def test_real_cpu_server_log() -> None:
    # captured from the real 0.5.23 server on CPU (tests/real_sglang): `cpu graph` label, a
    # glued line at the end, a 30 KiB server_args line that mentions "batch" many times
    recs = _records("sglang-0.5.23-real-cpu.log")
    kinds = [r[1] for r in recs]
    assert kinds.count("prefill") == 12 and kinds.count("decode") == 7
    assert kinds.count("server_ready") == 1 and len(kinds) == 20
    first = next(r for r in recs if r[1] == "prefill")
    assert first[0] == 64 and first[4]["cpu_graph"] is False and first[4]["new_token"] == 8


@pytest.mark.parametrize("name", ["sglang-0.5.23-real-cpu-bad-flag-cuda-graph-max-bs.txt",
                                  "sglang-0.5.23-real-cpu-bad-flag-enable-radix-cache.txt"])
def test_real_bad_flag_outputs(name: str) -> None:
    recs = _records(name)
    assert [r[1] for r in recs] == ["bad_cli_flag"]


# --- messy logs ------------------------------------------------------------------------------

DECODE = ("Decode batch, #running-req: 3, #token: 512, token usage: 0.01, cuda graph: True, "
          "gen throughput (token/s): 123.45, #queue-req: 0")
DECODE_FIELDS = {"running_req": 3, "num_token": 512, "token_usage": 0.01, "cuda_graph": True,
                 "gen_throughput": 123.45, "queue_req": 0}


@pytest.mark.parametrize("line", [
    "2026-12-01T10:00:00.123456Z stdout F [2026-04-08 14:05:21 TP0] " + DECODE,  # shipper
    "server.log:[2026-04-08 14:05:21 TP0] " + DECODE,  # grep -H style file name
    "2026-04-08 14:05:21 TP0] " + DECODE,  # lost opening bracket
    "Loading: 100%|██████████| 4/4 [00:01<00:00]\r[2026-04-08 14:05:21 TP0] " + DECODE,
    "Capturing batches (bs=1): 100%|███| 52/52 [00:05<00:00][2026-04-08 14:05:21 TP0] " + DECODE,
    "\x1b[32m[2026-04-08 14:05:21 TP0] " + DECODE + "\x1b[0m",  # ANSI colour
    "[2026-04-08 14:05:21 TP0] " + DECODE + "\r\n",  # CRLF
])
def test_messy_prefixes_keep_the_record(line: str) -> None:
    rec = parse_line(line)
    assert rec is not None and rec.kind == "decode"
    assert rec.timestamp == "2026-04-08 14:05:21" and rec.ranks == {"tp": 0}
    assert rec.fields == DECODE_FIELDS


def test_python_logging_prefix_gives_timestamp() -> None:
    rec = parse_line("2026-04-08 14:05:21,123 INFO scheduler.py:1234] " + DECODE)
    assert rec is not None and rec.timestamp == "2026-04-08 14:05:21,123"
    assert rec.fields == DECODE_FIELDS


@pytest.mark.parametrize("cut, expected", [
    # cut inside #token's value: 51 of 512 must not be read; the intact pair before stays
    ("Decode batch, #running-req: 3, #token: 51", {"running_req": 3}),
    ("Decode batch, #running-req: 3, #token: 512, token usage: 0.", {"running_req": 3,
                                                                     "num_token": 512}),
    ("Decode batch, #running-req: 3, #token: 512, cuda graph: Tr", {"running_req": 3,
                                                                    "num_token": 512}),
    ("Decode batch, #running-req: 3, #token: 512, gen throughput (token/s): 123.4",
     {"running_req": 3, "num_token": 512}),
    ("Decode batch, #running-req: 3, #tok", {"running_req": 3}),
])
def test_truncated_record_keeps_only_intact_pairs(cut: str, expected: dict[str, Any]) -> None:
    rec = parse_line("[2026-04-08 14:05:21] " + cut)
    assert rec is not None and rec.fields == expected


def test_record_with_no_intact_pair_is_counted_unreadable() -> None:
    stats = ParseStats()
    recs = list(parse_stream([b"[2026-04-08 14:05:21] Decode batch, #runn\n"], stats))
    assert recs == [] and stats.unreadable_records == 1


def test_hybrid_keys_are_not_plain_token_usage() -> None:
    rec = parse_line("[2026-04-08 14:05:21] Decode batch, #running-req: 1, #full token: 10, "
                     "full token usage: 0.50, #swa token: 3, swa token usage: 0.25, "
                     "mamba usage: 0.75, gen throughput (token/s): 1.00, #queue-req: 0")
    assert rec is not None
    assert "token_usage" not in rec.fields and "num_token" not in rec.fields
    assert rec.fields["full_token_usage"] == 0.5 and rec.fields["swa_token_usage"] == 0.25
    assert rec.fields["mamba_usage"] == 0.75 and rec.fields["full_token"] == 10


def test_unknown_fields_are_kept_slugged() -> None:
    rec = parse_line("[2026-04-08 14:05:21] Decode batch, #running-req: 1, #replay-token: 7, "
                     "est. read BW (GB/s per GPU): 12.50, #queue-req: 0")
    assert rec is not None
    assert rec.fields == {"running_req": 1, "replay_token": 7,
                          "est_read_bw_gb_s_per_gpu": 12.5, "queue_req": 0}


def test_non_utf8_bytes_are_read_with_replacement() -> None:
    stats = ParseStats()
    line = b"[2026-04-08 14:05:21] \xff\xfe " + DECODE.encode() + b"\n"
    recs = list(parse_stream([line], stats))
    assert len(recs) == 1 and recs[0].fields == DECODE_FIELDS and stats.bad_utf8 == 1


def test_very_long_line_is_survived() -> None:
    junk = "x" * 2_000_000
    rec = parse_line(junk + "[2026-04-08 14:05:21] " + DECODE)
    assert rec is not None and rec.fields == DECODE_FIELDS
    assert parse_line("Decode batch, " + "#a: 1, " * 100_000) is not None  # bounded body


def test_values_that_are_not_sglang_numbers_are_refused() -> None:
    rec = parse_line("Decode batch, #running-req: nan, #token: 1e5, token usage: inf, "
                     "#x: 1_0, #y: ²3, #queue-req: 2")
    assert rec is not None and rec.fields == {"queue_req": 2}


# --- events ----------------------------------------------------------------------------------

def test_events_single_line() -> None:
    text = "\n".join([
        "[2026-04-08 14:05:21] Decode out of memory happened. #retracted_reqs: 4, "
        "#new_token_ratio: 0.5000 -> 0.8000",
        "[2026-04-08 14:05:22 TP0] Prefill out of memory. Try to lower your batch size.",
        "[2026-04-08 14:05:23 TP0] Not enough memory. Please try to increase "
        "--mem-fraction-static. Current value: mem_fraction_static=0.8",
        "[2026-04-08 14:05:24] Health check failed. Server couldn't get a response from "
        "detokenizer for last 20 seconds. tic start time: 14:05:00. last_heartbeat time: 14:04",
        "[2026-04-08 14:05:25] Initialization failed. warmup error: Traceback...",
        "launch_server.py: error: argument --dtype: invalid choice: 'x' (choose from 'auto')",
        "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): "
        "address already in use",
    ])
    kinds = [(r.line_no, r.kind) for r in parse_text(text)]
    assert kinds == [(1, "decode_retract"), (2, "prefill_oom"), (3, "oom"),
                     (4, "health_check_failed"), (5, "warmup_failed"), (6, "bad_cli_flag"),
                     (7, "port_in_use")]


def test_traceback_is_one_crash_event_with_inner_oom() -> None:
    text = "\n".join([
        "[2026-04-08 14:05:21 TP0] Decode batch, #running-req: 1, #queue-req: 0",
        "[2026-04-08 14:05:22 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sglang/srt/managers/scheduler.py", line 2712, in run_scheduler_process',
        "    scheduler.event_loop_overlap()",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "/sglang/srt/model_executor/model_runner.py", line 1890, in forward',
        "    return self.forward_decode(forward_batch)",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "",
        "[2026-04-08 14:05:23] Received sigquit from a child process. It usually means the "
        "child failed.",
    ])
    recs = parse_text(text)
    assert [(r.line_no, r.kind) for r in recs] == [(1, "decode"), (2, "crash"), (11, "oom"),
                                                   (13, "crash")]
    crash = recs[1]
    assert crash.raw is not None and crash.raw.count("\n") == 9  # lines 2..11, one event
    assert crash.message is not None and "OutOfMemoryError" in crash.message
    assert recs[2].fields == {"tried_to_allocate_bytes": 2 * 2**30}
    assert recs[2].timestamp == "2026-04-08 14:05:22"  # dated by the group's prefix


def test_traceback_at_end_of_input_is_flushed() -> None:
    recs = parse_text("Traceback (most recent call last):\n  File \"x\", line 1\nValueError: x")
    assert [r.kind for r in recs] == ["crash"]


@pytest.mark.parametrize("lines", [
    ["[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
     "timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600123 ms"],
    ["[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collec",  # hard wrap
     "tive operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600123 ms"],
    ["[rank1]:[F ProcessGroupNCCL.cpp:1224] [PG 0 Rank 1] [Rank 1] Watchdog",  # wrap at space
     "caught collective operation timeout: WorkNCCL(SeqNum=9)"],
    ["[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] ProcessGroupNCCL's watchdog got stuck for "
     "480 seconds without making progress in monitoring enqueued collectives."],
])
def test_nccl_timeout_one_event(lines: list[str]) -> None:
    recs = parse_text("\n".join(["[2026-04-08 14:05:21] Memory pool end. avail mem=1 GB",
                                 *lines, "[2026-04-08 14:05:22] next"]))
    assert [(r.line_no, r.kind) for r in recs] == [(2, "nccl_timeout")]


def test_nccl_fragment_without_match_does_not_hide_next_record() -> None:
    recs = parse_text("[Rank 0] NCCL INFO ring 0\n[2026-04-08 14:05:21] " + DECODE)
    assert [(r.line_no, r.kind) for r in recs] == [(2, "decode")]


def test_stream_order_and_line_numbers_match_parse_line() -> None:
    # every single-line record of the fixtures is found the same way by both entry points
    for name in GOLDEN:
        lines = (FIX / name).read_bytes().split(b"\n")
        one = [parse_line(b, i) for i, b in enumerate(lines, 1)]
        single = [(r.line_no, r.kind, r.fields) for r in one if r is not None]
        with open(FIX / name, "rb") as f:
            stream = [(r.line_no, r.kind, r.fields) for r in parse_stream(f)]
        assert single == stream, name


@settings(max_examples=300, deadline=None)
@given(hs.binary(max_size=400))
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    parse_line(data)
    recs = list(parse_stream(data.split(b"\n")))
    assert all(isinstance(r, LogRecord) for r in recs)


_ALPHABET = hs.sampled_from(["Prefill batch", "Decode batch", ", ", ". ", ": ", "#token", "1",
                             "0.5", "True", "%", "[", "]", "2026-04-08 14:05:21", " TP0", "\r",
                             "\x1b[0m", "Traceback (most recent call last):", "  File", "\n",
                             "Watchdog caught collective", "é", "\xff"])


@settings(max_examples=300, deadline=None)
@given(hs.lists(_ALPHABET, max_size=40))
def test_grammar_soup_never_raises(parts: list[str]) -> None:
    text = "".join(parts)
    for r in parse_stream(text.encode("utf-8", "surrogateescape").split(b"\n")):
        assert r.kind
        for v in r.fields.values():
            assert isinstance(v, (int, float, bool))


# --- the learnt fast path says exactly what the slow path says -------------------------------

_KEYS = ["#running-req", "#token", "token usage", "cuda graph", "gen throughput (token/s)",
         "#queue-req", "cache hit rate", "#x-y", "full token usage", "#running_req", "time",
         "x time"]
_VALUES = hs.one_of(hs.integers(-5, 10**22).map(str),
                    hs.floats(0, 1e6, allow_nan=False).map(lambda f: f"{f:.2f}"),
                    hs.floats(0, 1e6, allow_nan=False).map(lambda f: f"{f:.1f}"),
                    hs.sampled_from(["True", "False", "007", "0.", "1e5", "20.00%", "5%", "-0",
                                     "nan", "0.10.", "12 ", "²", "", "15.73s", "3s", "12.50ms",
                                     "0.00s.", "20.00%.", "1.5s,", "s", "ms"]))


@settings(max_examples=120, deadline=None)
@given(hs.lists(hs.tuples(hs.sampled_from(_KEYS), _VALUES, _VALUES), min_size=1, max_size=8),
       hs.sampled_from(["", ", ", ",", " "]))
def test_shape_path_equals_slow_path(pairs: list[tuple[str, str, str]], tail: str) -> None:
    import json

    from collectors.sglang import log_fields as F

    F.clear_shapes()
    one = ", ".join(f"{k}: {a}" for k, a, _ in pairs) + tail
    two = ", ".join(f"{k}: {b}" for k, _, b in pairs) + tail
    first = F.parse_fields(one)  # slow, and learns the layout when it is regular
    for body, slow in ((one, first), (two, F._parse_slow(two))):
        fast, fj = F.parse_fields_json(body)
        assert fast == slow and [type(v) for v in fast.values()] == [
            type(v) for v in slow.values()]
        if fj is not None:
            assert json.loads("{" + fj + "}") == fast


def test_simulator_log_matches_an_independent_count() -> None:
    # tests/fixtures/sim-0.5.23-llm.log comes from simulator/ (regenerated by its owner), so the
    # expectation is computed from the file with plain regexes instead of being hard-coded
    import re

    path = FIX / "sim-0.5.23-llm.log"
    if not path.exists():
        pytest.skip("simulator fixture not generated yet")
    text = path.read_text(encoding="utf-8")
    with open(path, "rb") as f:
        recs = list(parse_stream(f))
    decode = [r for r in recs if r.kind == "decode"]
    prefill = [r for r in recs if r.kind == "prefill"]
    assert len(decode) == text.count("] Decode batch, ") > 0
    assert len(prefill) == text.count("] Prefill batch, ") > 0
    assert sum(r.kind == "decode_retract" for r in recs) == text.count("Retract requests.")
    assert sum(r.kind == "server_ready" for r in recs) == text.count("ready to roll")
    running = [int(v) for v in re.findall(r"Decode batch, #running-req: (\d+)", text)]
    assert [r.fields["running_req"] for r in decode] == running
    assert all(set(r.fields) == {"running_req", "num_token", "token_usage", "cuda_graph",
                                 "gen_throughput", "queue_req"} for r in decode)
    cached = sum(int(v) for v in re.findall(r"#cached-token: (\d+)", text))
    assert sum(r.fields["cached_token"] for r in prefill) == cached


def test_crlf_and_ansi_in_the_stream_fast_path() -> None:
    lines = [b"[2026-04-08 14:05:21 TP0] " + DECODE.encode() + b"\r\n",
             b"\x1b[33m[2026-04-08 14:05:21 TP0] " + DECODE.encode() + b"\x1b[0m\n"]
    recs = list(parse_stream(lines))
    assert [r.fields for r in recs] == [DECODE_FIELDS, DECODE_FIELDS]
