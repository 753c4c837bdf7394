"""SGLang's own request records as a trace: `--log-requests` lines of 0.4.0 to 0.5.23 (the forms
reconstructed from each version's source in tests/fixtures/traces/) and the
`--export-metrics-to-file` JSON lines. The real server's lines are checked by the real tier
(tests/real_sglang/test_real_sglang_trace.py)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from collectors.sglang.reqlog import block_hashes
from collectors.sglang.reqlog_repr import ElidedList, ElidedStr, ReprError, parse_call, split_line
from collectors.trace import importer
from collectors.trace.model import ReadOptions, TraceError

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
UTC = ReadOptions(tz="UTC", max_requests=1000)


def epoch(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo("UTC")).timestamp()


def test_repr_reader_forms() -> None:
    _, kind, rest = split_line("[2026-01-01 12:00:01.123] Finish: obj=X(rid='r', t='ab' ... 'yz', "
                               "ids=[1, 2] ... [8, 9], x=nan, n=-1), out={'meta_info': {'id': 'r'}}")
    assert kind == "finish"
    got = parse_call(rest)
    assert got["obj"]["__class__"] == "X" and got["obj"]["rid"] == "r"
    assert isinstance(got["obj"]["t"], ElidedStr) and isinstance(got["obj"]["ids"], ElidedList)
    assert got["obj"]["n"] == -1 and got["obj"]["x"] != got["obj"]["x"]  # nan
    # ' ... ' inside a string is text, not an elision
    assert parse_call("obj=X(t='a ... b')")["obj"]["t"] == "a ... b"
    assert split_line("Receive: obj=X(rid='r')")[:2] == (None, "receive")  # 0.5.8-0.5.11: no prefix
    assert split_line("[2026-01-01 12:00:00 TP0] Decode batch, #running-req: 1")[1] is None
    with pytest.raises(ReprError):
        parse_call("obj=X(rid='cut', text='abc")
    with pytest.raises(ReprError):
        parse_call("obj=<object at 0x7f>")


def test_block_hashes_chain() -> None:
    a, b = block_hashes(list(range(10)), 4), block_hashes([*range(8), 77, 78], 4)
    assert len(a) == 3 and a[:2] == b[:2] and a[2] != b[2]
    assert block_hashes([9, *range(1, 10)], 4)[1] != a[1]  # a different first block changes every later hash


def test_a_0_5_23_log_at_level_2() -> None:
    b = importer.build([FIX / "sglang-0.5.23-log-requests.log"], options=UTC)
    t = b.trace
    assert t.format == "sglang-log" and t.clock == "epoch"
    by_line = {r.line: r for r in t.requests}
    assert [r.line for r in t.requests] == [4, 6, 7, 10, 12]  # one request per Finish, by arrival
    a1, b0, b1, c1, d1 = (by_line[n] for n in (4, 6, 7, 10, 12))
    # a1: non-streaming: response sent - e2e_latency (epoch) wins over the bracketed second
    assert b.fields["first_arrival_ts"] == pytest.approx(1767268800.25)
    assert (a1.input_tokens, a1.output_tokens, a1.api) == (7, 16, "generate")
    assert a1.sampling == {"max_new_tokens": 16, "temperature": 0}
    # the batch: both elements arrive at their Receive line's time; ids whole -> prefix blocks
    assert b0.arrival_s == b1.arrival_s == pytest.approx(epoch("2026-01-01 12:00:02") - 1767268800.25)
    assert b0.hash_ids is not None and b1.hash_ids is not None and b0.cached_tokens == 0 and b1.cached_tokens == 4
    assert b0.sampling == {"max_new_tokens": 4, "ignore_eos": True}
    # chat: the Receive OpenAI line says so; request_received_ts times it
    assert c1.api == "chat" and c1.arrival_s == pytest.approx(1767268804.125 - 1767268800.25)
    assert c1.hash_ids is not None  # from the Receive line's whole ids, not the Finish line's cut ones
    assert d1.status == "aborted" and d1.session == "s1"
    notes = " | ".join(t.notes)
    assert "1 request(s) received but never finished" in notes
    assert "request_received_ts (1)" in notes and "response sent - e2e_latency (1)" in notes
    assert b.fields["bad_count"] == 1 and b.fields["bad_rows"][0]["line"] == 14
    assert "cannot be read" in b.fields["bad_rows"][0]["reason"]
    assert all(r.text is None for r in t.requests)
    kept = importer.build([FIX / "sglang-0.5.23-log-requests.log"], options=ReadOptions(tz="UTC", keep_text=True))
    assert {r.line: r.text for r in kept.trace.requests}[4] == "The capital of France is"


def test_every_era_in_one_log() -> None:
    b = importer.build([FIX / "sglang-mixed-eras-log-requests.log"], options=UTC)
    reqs = {r.line: r for r in b.trace.requests}
    assert sorted(reqs) == [1, 3, 5, 7, 9]
    e0, e1, e2, e3, j1 = (reqs[n] for n in (1, 3, 5, 7, 9))
    assert (e0.input_tokens, e0.output_tokens) == (6, 3)  # 0.4.0's single `in=` line
    assert e1.sampling == {"max_new_tokens": 16, "temperature": 0}  # 0.4.1's bare keys
    assert e2.sampling is None and e2.output_tokens == 16  # level 0: no sampling params
    assert e3.api == "chat"  # an OpenAI-adapted obj (return_text_in_logprobs) with ids and no text
    assert e0.api == e1.api == "generate" and e2.api == "generate"
    assert j1.input_tokens == 2 and j1.sampling == {"max_new_tokens": 3}
    assert b.fields["bad_count"] == 0
    # 0.4.0 has no e2e_latency: its Finish line's second is its arrival (the earliest of the file)
    assert b.fields["first_arrival_ts"] == epoch("2024-12-05 10:00:01")
    # e3's received_time is an epoch (0.5.7-0.5.9); j1's the JSON record's microsecond stamp
    assert e3.arrival_s == pytest.approx(1766581510.102859 - epoch("2024-12-05 10:00:01"))
    assert j1.arrival_s == pytest.approx(epoch("2026-01-01 12:00:09.792041") - epoch("2024-12-05 10:00:01"))
    assert e1.arrival_s == epoch("2024-12-20 10:00:03") - epoch("2024-12-05 10:00:01")  # its Receive line


def test_the_metrics_export() -> None:
    b = importer.build([FIX / "sglang-request-metrics-20260101_12.log"], options=UTC)
    assert b.trace.format == "sglang-metrics"
    m2, m1 = b.trace.requests  # m2 arrived first (request_received_ts); m1: response sent - e2e
    assert (m2.input_tokens, m2.output_tokens, m2.cached_tokens, m2.session) == (4, 2, 3, "s1")
    assert (m1.input_tokens, m1.output_tokens, m1.sampling) == (7, 16, {"max_new_tokens": 16, "temperature": 0})
    assert m2.hash_ids is not None and m1.hash_ids is None
    assert m1.arrival_s == pytest.approx((1767268801.5 - 0.5) - 1767268800.5)
    assert b.fields["bad_count"] == 1 and b.fields["bad_rows"][0]["line"] == 3


def test_local_times_follow_the_zone() -> None:
    utc = importer.build([FIX / "sglang-mixed-eras-log-requests.log"], options=UTC)
    berlin = importer.build([FIX / "sglang-mixed-eras-log-requests.log"],
                            options=ReadOptions(tz="Europe/Berlin", max_requests=1000))
    # e0's arrival comes from a bracketed local time; e3's from an epoch: their gap moves by the offset
    gap = {r.line: r.arrival_s for r in utc.trace.requests}
    gap_b = {r.line: r.arrival_s for r in berlin.trace.requests}
    assert gap_b[3] == gap[3]  # both from local times: the zone moves them together
    assert gap_b[7] - gap[7] == pytest.approx(3600.0)  # an epoch against a local time an hour ahead of UTC
    with pytest.raises(TraceError, match="not a time zone"):
        importer.build([FIX / "sglang-mixed-eras-log-requests.log"], options=ReadOptions(tz="Mars/Olympus"))
