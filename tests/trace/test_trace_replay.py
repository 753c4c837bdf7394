"""`pitwall probe --trace`: a stored trace replayed open-loop against the simulator (a real
process on loopback), through the real `pitwall` command, stored as a run.

What the contract promises, never timing: every request of the trace is sent once; each answer is
as long as the trace's request asked (max_new_tokens with ignore_eos); a session's turn is sent
after its predecessor's answer, carrying it; the run names the trace's digest, speed and window;
the schedule lag is reported with its bound."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pwtest import PY, REPO, subprocess_env
from sim_fixture import sim_server  # noqa: F401 - the module's simulator, fixture `sim`

from collectors.trace import importer
from collectors.trace.model import ReadOptions
from collectors.trace.replay import ReplayOptions, plan
from collectors.trace.replay_run import parse_window
from storage import repo
from storage.db import make_engine

FIX = REPO / "tests" / "fixtures" / "traces"
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def _replay(tmp_path: Path, url: str, source: str, name: str, *extra: str) -> tuple[dict, object]:
    db = f"sqlite:///{tmp_path / 'data' / 'pitwall.db'}"
    (tmp_path / "data").mkdir(exist_ok=True)
    engine = make_engine(db)
    built = importer.build([FIX / source], name=name, options=ReadOptions(max_requests=1000))
    importer.store(engine, built)
    got = subprocess.run([PY, "-m", "cli", "probe", "--url", url, "--trace", name, "--json", "--no-progress", *extra],
                         cwd=REPO, env=subprocess_env({"PITWALL_DATABASE_URL": db, "PITWALL_DATA_DIR": str(tmp_path / "data")}),
                         capture_output=True, text=True, timeout=240, check=False)
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout), (engine, built)


def test_a_trace_replays_every_request_at_its_length(tmp_path: Path, sim: str) -> None:
    rep, (engine, built) = _replay(tmp_path, sim, "mooncake_conversation.jsonl", "mc", "--speed", "4")
    asked = [r.output_tokens for r in built.trace.requests]
    assert rep["requests"] == rep["ok"] == 6 and rep["success_rate"] == 1.0
    assert rep["tokens_out"] == rep["expected_tokens_out"] == sum(asked)
    assert rep["trace"] == {"name": "mc", "digest": built.trace.digest, "requests": 6}
    assert rep["schedule_lag_s"]["p99"] is not None and rep["lag_bound_s"] >= 0.010
    assert isinstance(rep["trusted"], bool) and (rep["trusted"] or "schedule lag" in rep["untrusted_reason"])
    run = repo.get_probe_run(engine, run_id=rep["run_id"])
    assert run.status == "done" and run.fingerprint_detail["trace"]["digest"] == built.trace.digest
    assert run.fingerprint_detail["trace"]["speed"] == 4.0
    rows = repo.probe_requests(engine, run_id=rep["run_id"])
    assert sorted(int(d["trace_seq"]) for d in rows["detail"]) == list(range(6))
    assert sorted(rows["tokens_out"]) == sorted(asked)
    # Benchmarks reads the replay as a one-level open-loop run at the trace's offered rate
    from dashboard.services.views import benchmarks

    row = benchmarks.list_runs(engine).set_index("id").loc[rep["run_id"]]
    assert row["workload"] == "trace mc at 4x" and row["success_rate"] == 1.0
    (level,) = benchmarks.level_table(run).to_dict("records")
    assert level["level"] == pytest.approx(rep["offered_rps"]) and level["requests"] == 6
    assert level["ttft_p99_s"] == rep["ttft_s"]["p99"] and level["trusted"] == rep["trusted"]
    # the same trace at another speed is another workload
    again, _ = _replay(tmp_path, sim, "mooncake_conversation.jsonl", "mc2", "--speed", "8", "--window", "0..2.5")
    assert again["requests"] == 4
    assert repo.get_probe_run(engine, run_id=again["run_id"]).fingerprint != run.fingerprint


def test_sessions_wait_for_their_answers(tmp_path: Path, sim: str) -> None:
    rep, (engine, _) = _replay(tmp_path, sim, "aiperf_sessions.jsonl", "chats", "--speed", "10")
    assert rep["ok"] == 4
    rows = repo.probe_requests(engine, run_id=rep["run_id"]).to_dict("records")
    turns = sorted((r for r in rows if r["detail"]["session"] == "s1"), key=lambda r: r["detail"]["turn"])
    assert [r["detail"]["turn"] for r in turns] == [1, 2, 3]
    for before, after in zip(turns, turns[1:], strict=False):
        answered = before["start_ts"] + before["e2e_s"] - before["detail"]["lag_s"]
        assert after["start_ts"] >= answered - 0.001  # sent after the answer it carries
        assert after["tokens_in"] > before["tokens_in"]  # the history came along


def test_window_speed_and_failed_rows() -> None:
    assert parse_window("10..70") == (10.0, 70.0) and parse_window("..5") == (None, 5.0)
    for bad in ("10", "5..1", "a..b"):
        with pytest.raises(ValueError, match="--window"):
            parse_window(bad)
    built = importer.build([FIX / "burstgpt_1.csv"])
    p = plan(built.trace.requests, None, ReplayOptions(speed=2.0))
    assert [d.at_s for d in p.items] == [0.0, 20.0, 56.5]  # the failed row is not sent
    assert p.skipped_failed == 1 and "marked failed" in p.notes[0]
    assert all(d.max_new_tokens == d.req.output_tokens for d in p.items)


def test_replays_compare_on_the_same_traffic_and_are_refused_on_other(tmp_path: Path, sim: str) -> None:
    """Two replays of one trace window at one speed are one workload: Compare matches them at
    their level (the offered rate); a replay at another speed is other traffic, and Compare says
    it differs in the trace's speed instead of judging it."""
    from collectors.trace.replay_run import load, run
    from scorecard.build import build_scorecard
    from scorecard.compare import compare

    engine = make_engine(f"sqlite:///{tmp_path / 'pitwall.db'}")
    importer.store(engine, importer.build([REPO / "traces" / "demo-chat.jsonl"]))
    trace, requests = load(engine, "demo-chat")
    ids = [run(engine, url=sim, trace=trace, requests=requests, options=ReplayOptions(speed=speed, end_s=4.0))[0]
           for speed in (4.0, 4.0, 8.0)]
    runs = [repo.get_probe_run(engine, run_id=i) for i in ids]
    assert all(r is not None and r.status == "done" for r in runs)
    assert runs[0].fingerprint == runs[1].fingerprint != runs[2].fingerprint  # type: ignore[union-attr]
    cards = [build_scorecard(engine, run_id=i) for i in ids]
    same = compare(cards[:2])
    assert same.comparable and same.matched_level == runs[0].spec["levels"][0]  # type: ignore[union-attr]
    assert any(d.key == "ttft_p99_s" and d.values[0] is not None and d.values[1] is not None for d in same.deltas)
    other = compare([cards[0], cards[2]])
    assert not other.comparable
    assert any("speed" in line for line in other.workload_diff[0]), other.workload_diff


def test_an_image_server_replays_through_the_images_api(tmp_path: Path) -> None:
    """Against an image server the trace's requests are image generations (`--api images`, what
    the Traces page asks for an image server): each one an images request, its per-image latency
    its E2E, which is what `--speed auto` holds to `image_p99_s`."""
    from sim_fixture import running_sim

    from collectors.trace.capacity import misses
    from collectors.trace.replay_run import load, run

    engine = make_engine(f"sqlite:///{tmp_path / 'pitwall.db'}")
    importer.store(engine, importer.build([REPO / "traces" / "demo-chat.jsonl"]))
    trace, requests = load(engine, "demo-chat")
    args = ["--model-path", "Qwen/Qwen-Image", "--model-type", "diffusion", "--sim-speed", "50"]
    with running_sim(args, tmp_path / "image-sim.log") as url:
        run_id, rep = run(engine, url=url, trace=trace, requests=requests,
                          options=ReplayOptions(speed=1.0, max_requests=4, api="images"))
    assert rep["requests"] == 4 and rep["ok"] == 4, rep["errors"]
    rows = repo.probe_requests(engine, run_id=run_id)
    assert len(rows) == 4 and rows["ok"].astype(bool).all() and (rows["e2e_s"] > 0).all()
    stored = repo.get_probe_run(engine, run_id=run_id)
    assert stored is not None and stored.api == "images" and stored.fingerprint_detail["api"] == "images"
    # the latency verdict alone (a busy host may leave the client behind its schedule: that is a
    # miss of its own, said after the latency ones)
    assert misses(rep, {"image_p99_s": 1e-6}, image=True)[0].startswith("per-image p99")
    assert misses({**rep, "trusted": True}, {"image_p99_s": 600.0}, image=True) == []


def test_a_stored_sweep_becomes_a_trace_and_replays_as_it_went(tmp_path: Path, sim: str) -> None:
    """`pitwall trace import --run N`: the requests a sweep sent (its warm-up left out), when it
    sent them, with their token counts; replayed, each answer is as long as the sweep's was."""
    from collectors.trace.replay_run import load, run

    db = f"sqlite:///{tmp_path / 'data' / 'pitwall.db'}"
    (tmp_path / "data").mkdir()
    env = subprocess_env({"PITWALL_DATABASE_URL": db, "PITWALL_DATA_DIR": str(tmp_path / "data")})

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([PY, "-m", "cli", *args], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=240, check=False)

    swept = cli("probe", "--url", sim, "--concurrency", "2", "--requests", "6", "--warmup", "1", "--max-new-tokens",
                "8", "--ignore-eos", "--prompt-set", "synthetic", "--input-tokens", "40", "--json", "--no-progress")
    assert swept.returncode == 0, swept.stderr
    engine = make_engine(db)
    (sweep_run,) = repo.list_probe_runs(engine)
    got = cli("trace", "import", "--run", str(sweep_run.id), "--name", "swept", "--json")
    assert got.returncode == 0, got.stderr
    fields = json.loads(got.stdout)
    assert fields["requests"] == 6 and fields["format"] == "pitwall-run" and fields["bad_count"] == 0
    assert any("1 warm-up request(s) left out" in n for n in fields["notes"])
    sent = repo.probe_requests(engine, run_id=sweep_run.id)
    sent = sent[~sent["warmup"].astype(bool)]
    trace, requests = load(engine, "swept")
    assert sorted(r.input_tokens for r in requests) == sorted(int(v) for v in sent["tokens_in"])
    assert [r.output_tokens for r in requests] == [8] * 6
    span = float(sent["start_ts"].max() - sent["start_ts"].min())
    assert trace.duration_s == pytest.approx(span, abs=1e-3)  # the moments it sent them
    replay_id, rep = run(engine, url=sim, trace=trace, requests=requests, options=ReplayOptions(speed=1.0))
    assert rep["ok"] == 6 and sorted(repo.probe_requests(engine, run_id=replay_id)["tokens_out"]) == [8] * 6
    assert cli("trace", "import", "--run", "999").returncode == 1  # no such run: said, nothing stored
    assert cli("trace", "import", "--run", "1", "x.jsonl").returncode == 2  # files or a run, not both
