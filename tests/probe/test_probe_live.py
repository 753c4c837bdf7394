"""The probe against a real HTTP server: the stamping stub server in its own process.

Timing checks compare absolute CLOCK_MONOTONIC instants (client perf_counter vs the server's
stamps in another process on this host): causality, never durations.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from probe_stub_server import spawn
from sqlalchemy.engine import Engine

from collectors.probe import store
from collectors.probe.cli import open_engine, probe_cli
from collectors.probe.client import make_session, send
from collectors.probe.sse import hash_output
from collectors.probe.sweep import SweepSpec, run_sweep
from collectors.probe.workloads import Prompt, WorkloadSpec, request_body
from runner.sweeps import Sweeps
from storage import repo

pytestmark = pytest.mark.timeout(120)
SHORT = {"max_new_tokens": 8}  # 8 tokens x 5 ms keeps each request short


@pytest.fixture(scope="module")
def stub() -> Iterator[str]:
    proc, port = spawn(delay_ms=5.0, first_delay_ms=20.0)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture()
def engine(tmp_path: Path) -> Engine:
    return open_engine(f"sqlite:///{tmp_path / 'p.db'}")


def _stamps(url: str) -> dict[str, Any]:
    async def get() -> Any:
        async with make_session() as s, s.get(url + "/stamps") as r:
            return await r.json()
    return asyncio.run(get())


def _send_many(url: str, api: str, n: int, tokens: int = 8) -> list[Any]:
    spec = WorkloadSpec(max_new_tokens=tokens)

    async def go() -> list[Any]:
        async with make_session() as s:
            path, body = request_body(api, Prompt("p", "hello world"), spec)
            return list(await asyncio.gather(*(send(s, url + path, api, body, seq=i, timeout_s=20) for i in range(n))))
    return asyncio.run(go())


def test_ttft_itl_and_tokens_match_server_stamps(stub: str) -> None:
    _stamps(stub)
    recs = _send_many(stub, "generate", 4, tokens=8)
    st = _stamps(stub)
    for r in recs:
        assert r.ok, r.error_detail
        s = st[r.request_id]
        # the client started before the server parsed the request and saw the first token after
        # the server sent it: TTFT >= server-true TTFT
        assert r.t_start <= s["t0"] and r.t_start + r.ttft_s >= s["ts"][0]
        assert r.ttft_s >= s["ts"][0] - s["t0"]
        assert len(r.itl_s) == 7 and r.tokens_out == 8  # 8 one-token chunks -> 7 gaps
        assert r.tokens_in == 2 and r.tokens_cached == 3
        assert r.e2e_s >= r.ttft_s and r.tpot_s is not None
    assert len({r.output_hash for r in recs}) == 1  # same prompt, same tokens


def test_multi_token_chunks_are_normalised_per_token(stub: str) -> None:
    recs = _send_many(stub + "/mode/multi", "generate", 1, tokens=8)
    r = recs[0]
    # 4 chunks of 2 tokens: the first chunk gives TTFT, each of the 3 later gaps adds 2 equal values
    assert r.ok and len(r.itl_s) == 6 and r.tokens_out == 8
    assert r.itl_s[0] == r.itl_s[1] and r.itl_s[2] == r.itl_s[3] and r.itl_s[4] == r.itl_s[5]
    # TPOT over the same 6 tokens: the first chunk's 2 tokens both arrived at TTFT (not 8 - 1)
    assert r.tpot_s == pytest.approx(sum(r.itl_s) / 6)


def test_reasoning_channel_sets_ttft(stub: str) -> None:
    _stamps(stub)
    recs = _send_many(stub + "/mode/reason", "chat", 1, tokens=8)
    r = recs[0]
    s = _stamps(stub)[r.request_id]
    # tokens 1-4 are reasoning_content: TTFT was taken at the first reasoning chunk, so every
    # later chunk is an inter-token gap (7 of 8 tokens; from the first content chunk it would be
    # 3), and the first token came no later than the server stamped the first content chunk
    assert r.ok and len(r.itl_s) == 7, r.itl_s
    assert r.t_start + r.ttft_s <= s["ts"][4] + 1.0
    assert r.tokens_out == 8 and r.tokens_cached == 2  # from the final usage chunk
    assert r.output_hash != hash_output("")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("suffix", "api", "kind", "timeout"),
    [
        ("/mode/status429", "generate", "http_429", 20.0),
        ("/mode/status500", "chat", "http_500", 20.0),
        ("/mode/status503", "completions", "http_503", 20.0),
        ("/mode/badjson", "generate", "invalid_response", 20.0),
        ("/mode/nodone", "generate", "stream_broken", 20.0),
        ("/mode/hang", "generate", "timeout", 0.3),
        ("/wrong-prefix", "completions", "http_404", 20.0),  # wrong API path
        ("/mode/status503", "images", "http_503", 20.0),
    ],
)
def test_failures_become_error_kinds_and_run_is_stored(
    stub: str, engine: Engine, suffix: str, api: str, kind: str, timeout: float
) -> None:
    spec = SweepSpec(url=stub + suffix, api=api, levels=[2], requests=3, warmup=0, timeout_s=timeout, workload=WorkloadSpec(**SHORT))
    report = asyncio.run(run_sweep(spec, engine=engine)).to_dict()
    # every request failed: the run is failed, saying how many and why
    assert report["status"] == "failed" and report["levels"][0]["errors"] == {kind: 3}
    assert report["error"].startswith("all 3 requests failed: "), report["error"]
    run = store.get_run(engine, run_id=report["run_id"])
    assert run is not None and run["status"] == "failed" and run["progress"] == 1.0
    rows = store.output_rows(engine, run_id=report["run_id"])
    assert len(rows) == 3 and not any(ok for _s, ok, _h in rows)


def test_server_down_is_connect_refused(engine: Engine) -> None:
    spec = SweepSpec(url=f"http://127.0.0.1:{_closed_port()}", levels=[1], requests=2, warmup=0)
    report = asyncio.run(run_sweep(spec, engine=engine)).to_dict()
    assert report["levels"][0]["errors"] == {"connect_refused": 2}
    assert report["error"] == ("all 2 requests failed: connect refused (nothing answers at the "
                               "server's address; is it up?)")


def test_server_killed_mid_stream(engine: Engine) -> None:
    proc, port = spawn(delay_ms=5.0, first_delay_ms=5.0)
    try:
        spec = SweepSpec(url=f"http://127.0.0.1:{port}/mode/die", levels=[1], requests=1, warmup=0, workload=WorkloadSpec(**SHORT))
        report = asyncio.run(run_sweep(spec, engine=engine)).to_dict()
    finally:
        proc.kill()
        proc.wait(timeout=10)
    # the server process exits after its second chunk: the connection is lost mid-stream
    assert report["levels"][0]["errors"] == {"stream_broken": 1}
    # its only request failed: the run is failed, with the reason
    run = store.get_run(engine, run_id=report["run_id"])
    assert run is not None and (run["status"], run["error"]) == ("failed", "its only request failed: stream broken")


def test_abort_on_error_rate(stub: str, engine: Engine) -> None:
    spec = SweepSpec(url=stub + "/mode/status500", levels=[1, 2], requests=40, warmup=0, abort_min_requests=5, workload=WorkloadSpec(**SHORT))
    report = asyncio.run(run_sweep(spec, engine=engine)).to_dict()
    # stopped at the first level; none of its requests succeeded, so the run is failed, saying so
    assert report["status"] == "failed" and len(report["levels"]) == 1
    run = store.get_run(engine, run_id=report["run_id"])
    assert run is not None and run["status"] == "failed"
    assert run["error"].startswith("all ") and run["error"].endswith("HTTP 500; the sweep stopped at c=1")
    assert 5 <= store.request_count(engine, run_id=report["run_id"]) < 40


def test_cli_json_shape_stores_run(stub: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    code = probe_cli(["--url", stub, "--api", "completions", "--concurrency", "1,2", "--requests", "4",
                      "--max-new-tokens", "4", "--json", "--db", db])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"fingerprint", "levels"} and [lv["concurrency"] for lv in out["levels"]] == [1, 2]
    lv = out["levels"][1]
    assert lv["requests"] == 4 and lv["ok"] == 4 and lv["errors"] == {}
    assert lv["ttft_s"]["p50"] > 0 and lv["throughput"]["output_tok_s"] > 0
    assert isinstance(lv["self_check"]["trusted"], bool)
    engine = open_engine(db)
    run = store.get_run(engine, run_id=1)
    assert run is not None and run["fingerprint"] == out["fingerprint"] and run["status"] == "done"
    assert run["fingerprint_detail"]["model"] == "stub-model"  # asked from /v1/models
    assert store.request_count(engine, run_id=1) == (4 + 1) + (4 + 2)  # measured + warm-up per level


def test_cli_probe_attaches_to_the_server_whose_address_it_hit(
        stub: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    engine = open_engine(db)
    port = stub.rsplit(":", 1)[1]
    srv = repo.upsert_server(engine, name="stubby", base_url=f"http://localhost:{port}/")
    repo.upsert_server(engine, name="elsewhere", base_url="http://127.0.0.1:1")
    old = repo.create_launch(engine, server_id=srv.id, profile_name="p0", status="exited",
                             argv=[], env={}, started_at=1.0)
    repo.update_launch(engine, launch_id=old.id, ended_at=2.0)
    now = repo.create_launch(engine, server_id=srv.id, profile_name="p1", status="ready",
                             argv=[], env={}, started_at=3.0)
    args = ["--api", "completions", "--concurrency", "1", "--requests", "2", "--max-new-tokens", "2",
            "--db", db, "--no-progress"]
    assert probe_cli(["--url", stub, *args]) == 0  # the same address, spelled 127.0.0.1, no slash
    out = capsys.readouterr().out
    assert "run 1 attached to server stubby and its current launch (profile p1)." in out
    run = repo.get_probe_run(engine, run_id=1)
    assert (run.server_id, run.launch_id) == (srv.id, now.id)
    # a URL no configured server has stays unattached, and says so
    repo.upsert_server(engine, name="stubby", base_url="http://127.0.0.1:1/elsewhere")
    assert probe_cli(["--url", stub, *args]) == 0
    assert "run 2 not attached to a server: no configured server has the address" in capsys.readouterr().out
    run = repo.get_probe_run(engine, run_id=2)
    assert (run.server_id, run.launch_id) == (None, None)


def test_cli_bad_arguments_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert probe_cli(["--url", "localhost:1", "--no-store"]) == 2
    assert "http://" in capsys.readouterr().err
    assert probe_cli(["--url", "http://127.0.0.1:1", "--prompt-set", "nope", "--no-store"]) == 2


def test_rate_mode_and_images(stub: str) -> None:
    spec = SweepSpec(url=stub, mode="rate", levels=[50.0], requests=10, warmup=1, workload=WorkloadSpec(**SHORT))
    lv = asyncio.run(run_sweep(spec)).to_dict()["levels"][0]
    assert lv["rate"] == 50.0 and lv["ok"] == 10 and lv["achieved"]["rate"] > 0
    spec = SweepSpec(url=stub, api="images", levels=[2], requests=4, warmup=0, workload=WorkloadSpec(**SHORT))
    lv = asyncio.run(run_sweep(spec)).to_dict()["levels"][0]
    assert lv["ok"] == 4 and lv["throughput"]["images_per_min"] > 0 and lv["ttft_s"]["p50"] is None


def test_consistency_against_baseline(stub: str, engine: Engine) -> None:
    base = asyncio.run(run_sweep(SweepSpec(url=stub, levels=[2], requests=6, warmup=0, workload=WorkloadSpec(**SHORT)), engine=engine)).to_dict()
    spec = SweepSpec(url=stub, levels=[1], requests=6, warmup=0, baseline_run_id=base["run_id"], workload=WorkloadSpec(**SHORT))
    rep = asyncio.run(run_sweep(spec, engine=engine)).to_dict()
    assert rep["consistency"]["compared"] == 6 and rep["consistency"]["differing"] == 0
    assert rep["consistency"]["warnings"] == []


def test_sweep_in_subprocess(stub: str, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'sub.db'}"
    engine = open_engine(db)
    spec = SweepSpec(url=stub, levels=[2], requests=4, warmup=0, api_key="secret", workload=WorkloadSpec(**SHORT))
    _stamps(stub)
    run_id = store.create_run(engine, url=spec.url, api=spec.api, spec=spec.to_dict(), fingerprint="",
                              fingerprint_detail={}, server_id=None, launch_id=None, name=None,
                              baseline_run_id=None)
    code, tail = Sweeps(engine, db, timeout_s=60).run(run_id=run_id, spec=spec.to_dict(redact=False))
    assert code == 0, tail
    seen = _stamps(stub)
    assert len(seen) == 4 and {s["auth"] for s in seen.values()} == {"Bearer secret"}  # API key sent
    run = store.get_run(engine, run_id=run_id)
    assert run is not None and run["status"] == "done" and run["report"]["levels"][0]["ok"] == 4
    assert run["spec"]["api_key"] == "***"
