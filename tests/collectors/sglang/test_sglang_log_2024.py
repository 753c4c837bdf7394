"""2024-era scheduler-log lines, and lines a user cut when copying them.

Every line below is a real form, written from the source of the release named beside it (the
published wheels' `sglang/srt/managers/router/model_rpc.py` 0.1.x, `controller/tp_worker.py`
0.2.0-0.2.5, `tp_worker.py` 0.2.9-0.3.0, `scheduler.py` 0.3.4-0.4.3); "cut" marks a line a
user shortened, which SGLang itself never writes. The rules (log_fields.py): a last value is
kept only when it is provably whole — a closing separator, a key that ends the line in that
version, a ``%`` or unit suffix (written after the whole number), or exactly the decimals
SGLang prints that field with (``:.2f``); an integer at the end of a cut line is dropped.
"""

from __future__ import annotations

from typing import Any

import pytest

from collectors.base import ServerTarget
from collectors.sglang import log_fields
from collectors.sglang.log import parse_line, records_to_rows
from collectors.sglang.log_stream import parse_text

GOLDEN_2024: list[tuple[str, str, dict[str, Any]]] = [
    # (b) `#running_req` ends the line, no terminator: model_rpc.py 0.1.3, 0.1.6, 0.1.9
    ("0.1.9", "new fill batch. #seq: 2. #cached_token: 5. #new_token: 40. #remaining_req: 1. "
     "#running_req: 3",
     {"new_seq": 2, "cached_token": 5, "new_token": 40, "queue_req": 1, "running_req": 3}),
    # (a) cut just after the `%` (`cache hit rate: {x:.2f}%, ` follows in the source)
    ("0.2.5 cut", "[gpu_id=0] Prefill batch. #new-seq: 1, #new-token: 20, #cached-token: 5, "
     "cache hit rate: 45.21%",
     {"new_seq": 1, "new_token": 20, "cached_token": 5, "cache_hit_rate": 45.21}),
    ("0.4.0 cut", "[2024-12-03 10:00:00 TP0] Prefill batch. #new-seq: 2, #new-token: 40, "
     "#cached-token: 10, cache hit rate: 45.21%",
     {"new_seq": 2, "new_token": 40, "cached_token": 10, "cache_hit_rate": 45.21}),
    # (a) 0.1.12 ends with `tree_cache_hit_rate: 20.00%.`; cut before the final period
    ("0.1.12 cut", "new fill batch. #seq: 1. #cached_token: 5. #new_token: 20. "
     "#remaining_req: 0. #running_req: 0. tree_cache_hit_rate: 20.00%",
     {"new_seq": 1, "cached_token": 5, "new_token": 20, "queue_req": 0, "running_req": 0,
      "cache_hit_rate": 20.0}),
    # (c) unit suffix: the 0.1.12 DEBUG line `fsm_cache_avg_init_time: {x:.2f}s. ` -> `_s`
    ("0.1.12", "fsm_cache_hit_rate: 50.00%. fsm_cache_avg_init_time: 0.12s. "
     "ff_cache_hit_rate: 0.00%. ff_cache_avg_init_time: 15.73s. ",
     {"fsm_cache_hit_rate": 50.0, "fsm_cache_avg_init_time_s": 0.12, "ff_cache_hit_rate": 0.0,
      "ff_cache_avg_init_time_s": 15.73}),
    ("0.1.12 cut", "fsm_cache_hit_rate: 50.00%. fsm_cache_avg_init_time: 15.73s",
     {"fsm_cache_hit_rate": 50.0, "fsm_cache_avg_init_time_s": 15.73}),
    # (d) cut after a value printed `:.2f` with both decimals there: whole
    ("0.2.14 cut", "[04:40:56 TP0] Decode batch. #running-req: 5, #token: 900, "
     "token usage: 0.03, gen throughput (token/s): 512.00",
     {"running_req": 5, "num_token": 900, "token_usage": 0.03, "gen_throughput": 512.0}),
    ("0.3.0 cut", "[04:40:56 TP0] Decode batch. #running-req: 5, #token: 900, token usage: 0.03",
     {"running_req": 5, "num_token": 900, "token_usage": 0.03}),
    ("0.4.2 cut", "[2025-01-27 10:00:01 TP0] Decode batch. #running-req: 3, #token: 512, "
     "token usage: 0.01, accept len: 2.50",
     {"running_req": 3, "num_token": 512, "token_usage": 0.01, "accept_len": 2.5}),
    # (d) cut inside a `:.2f` value (one decimal of two): dropped, never guessed
    ("0.2.14 cut", "[04:40:56 TP0] Decode batch. #running-req: 5, #token: 900, "
     "token usage: 0.03, gen throughput (token/s): 512.0",
     {"running_req": 5, "num_token": 900, "token_usage": 0.03}),
    ("0.4.2 cut", "[2025-01-27 10:00:01 TP0] Decode batch. #running-req: 3, #token: 512, "
     "token usage: 0.01, accept len: 2.5", {"running_req": 3, "num_token": 512,
                                           "token_usage": 0.01}),
    # (d) an integer at the end may be cut anywhere (#token: 90 of 900): dropped
    ("0.3.0 cut", "[04:40:56 TP0] Decode batch. #running-req: 5, #token: 90", {"running_req": 5}),
    # `#running-req` (hyphen) never ends a line in any release read (0.1.3 -> 0.5.23): a line
    # ending in it was cut, and its integer is not provably whole
    ("0.3.4 cut", "[2024-10-19 10:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: 20, "
     "#cached-token: 5, cache hit rate: 20.00%, token usage: 0.02, #running-req: 1",
     {"new_seq": 1, "new_token": 20, "cached_token": 5, "cache_hit_rate": 20.0,
      "token_usage": 0.02}),
]


@pytest.mark.parametrize("version, line, expected", GOLDEN_2024,
                         ids=[f"{v}-{i}" for i, (v, _, _) in enumerate(GOLDEN_2024)])
def test_2024_forms(version: str, line: str, expected: dict[str, Any]) -> None:
    rec = parse_line(line)
    assert rec is not None and rec.fields == expected


@pytest.mark.parametrize("version, line, expected", GOLDEN_2024,
                         ids=[f"{v}-{i}" for i, (v, _, _) in enumerate(GOLDEN_2024)])
def test_a_learnt_shape_reads_what_the_slow_path_reads(version: str, line: str,
                                                       expected: dict[str, Any]) -> None:
    # the same line three times: the shape learnt from the first must agree, cut lines included
    log_fields.clear_shapes()
    recs = parse_text((line + "\n") * 3)
    assert [r.fields for r in recs] == [expected] * 3


def test_a_shape_learnt_from_a_whole_line_does_not_read_a_cut_decimal() -> None:
    log_fields.clear_shapes()
    whole = ("[04:40:56 TP0] Decode batch. #running-req: 5, #token: 900, token usage: 0.03, "
             "gen throughput (token/s): 512.00")
    recs = parse_text(f"{whole}\n{whole}\n{whole[:-1]}\n")
    assert [r.fields.get("gen_throughput") for r in recs] == [512.0, 512.0, None]


def test_units_are_base_units_with_s_in_the_name() -> None:
    rec = parse_line("[2026-04-08 14:05:21] Prefill batch, #new-seq: 1, time: 15.73s, "
                     "wait: 250.00ms, #queue-req: 0")
    assert rec is not None
    assert rec.fields == {"new_seq": 1, "time_s": 15.73, "wait_s": 0.25, "queue_req": 0}


def test_rows_from_2024_lines() -> None:
    srv = ServerTarget(id=1, name="s", base_url="http://127.0.0.1:1")
    text = (GOLDEN_2024[0][1] + "\n"  # 0.1.9: running 3
            + GOLDEN_2024[1][1] + "\n")  # 0.2.5 cut after %: lifetime hit rate 45.21 % = 0.4521
    rows = {(s.metric): s.value for s in records_to_rows(parse_text(text), srv, 0.0).samples}
    assert rows["log.running_req"] == 3
    assert abs(rows["log.cache_hit_rate_lifetime"] - 0.4521) < 1e-12


@pytest.mark.parametrize("line", [
    # 0.1.12-0.2.5 (model_rpc.py, controller/tp_worker.py): lower case, a comma
    "[gpu_id=0] decode out of memory happened, #retracted_reqs: 2, "
    "#new_token_ratio: 0.4000 -> 0.5000",
    # 0.2.14-0.4.x (tp_worker.py, scheduler.py)
    "[04:40:56 TP0] Decode out of memory happened. #retracted_reqs: 2, "
    "#new_token_ratio: 0.4000 -> 0.5000",
])
def test_2024_retraction_lines(line: str) -> None:
    rec = parse_line(line)
    assert rec is not None and rec.kind == "decode_retract"
    assert rec.fields == {"retracted_req": 2, "new_token_ratio_before": 0.4,
                          "new_token_ratio_after": 0.5}
