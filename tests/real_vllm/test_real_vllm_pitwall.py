"""Pitwall driving real vLLM beside real SGLang, on CPU, serving the very same tiny model (fixed
weights on disk, scripts/vllm_cpu/write_weights.py): a real Runner launches both from profiles,
the live log and /metrics hold what the recorded fixtures (tests/fixtures/vllm-0.32.0-cpu-*) hold,
its vLLM collectors fill the store from the live server, a probe sweep's percentiles are exact,
the two engines compare on one workload with the output-consistency check, and a relaunch of the
vLLM server under a profile vLLM refuses at start-up rolls back to the one that ran.

The comparison is written as Markdown to $PITWALL_CROSS_ENGINE_MD when set (the note of the
session that built it quotes one), else into the test's folder.

Tests run in file order on one worker (tests/pwtest.py RUN_FIRST) and share the module's rig.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from real_vllm_env import free_port, sglang_env, vllm_env

from cli.wiring import runner_parts
from collectors.probe.sweep import SweepSpec, run_sweep
from collectors.probe.workloads import WorkloadSpec
from collectors.promtext import parse_metrics
from collectors.registry import build_collectors
from collectors.vllm.log_parse import parse_line
from config.settings import Settings
from export.formats import to_markdown
from launching import launcher
from launching.profiles import ProfileSpec, dump_profile
from runner.loop import Runner
from scorecard.build import build_scorecard
from scorecard.compare import compare
from storage import repo
from storage.db import make_engine

pytestmark = [pytest.mark.real_vllm, pytest.mark.slow, pytest.mark.timeout(1800)]

SG, VL = "xe-sglang", "xe-vllm"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SGLANG_FLAGS: dict[str, Any] = {
    "device": "cpu", "attention-backend": "torch_native", "disable-overlap-schedule": True,
    "enable-metrics": True, "max-total-tokens": 4096, "log-level": "info", "enable-cache-report": True,
    "sleep-on-idle": True, "dtype": "float32", "served-model-name": "tiny", "decode-log-interval": 5,
}
VLLM_FLAGS: dict[str, Any] = {"dtype": "float32", "max-model-len": 512, "served-model-name": "tiny"}
#: stats lines every second (10 s by default), so a sweep of a few seconds has its log figures
VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1",
            "VLLM_LOG_STATS_INTERVAL": "1"}
INTERVALS = {"sglang_log": 0.5, "vllm_log": 0.5, "sglang_metrics": 1.0, "vllm_metrics": 1.0,
             "sglang_api": 2.0, "vllm_api": 2.0}
#: what the scorecard and the Server page read of an LLM server's /metrics and log
NEEDED = {"metrics.num_running_reqs", "metrics.num_queue_reqs", "metrics.token_usage", "metrics.prompt_tokens_per_s",
          "metrics.generation_tokens_per_s", "metrics.requests_per_s", "metrics.cached_token_ratio",
          "metrics.ttft_p50_s", "metrics.ttft_p99_s", "metrics.itl_p99_s", "metrics.e2e_p99_s",
          "metrics.queue_time_p99_s", "log.running_req", "log.gen_throughput_tok_s", "log.token_usage"}
WORKLOAD = WorkloadSpec(max_new_tokens=32, ignore_eos=True, temperature=0.0, model="tiny", num_prompts=8)
REQUESTS = 32  # a level; long enough that the servers' own figures (scraped each second) cover the run


@dataclass
class Rig:
    engine: Any
    settings: Settings
    ids: dict[str, int]
    urls: dict[str, str]
    runner: Runner
    vllm: dict[str, str]
    runs: dict[str, int]

    def request(self, kind: str, server: str, profile: str | None = None, timeout_s: float = 600.0) -> Any:
        intent = launcher.request(self.engine, kind=kind, server_name=server, actor="test", profile=profile)
        assert intent.id is not None
        final = launcher.follow(self.engine, intent.id, timeout_s=timeout_s, poll_s=0.5)
        assert final is not None and final.state in launcher.FINAL_STATES, f"{kind} {server}: {final}"
        return final

    def log(self, server: str) -> str:
        path = Path(self.settings.data_dir) / "logs" / f"{server}.log"
        return path.read_text(errors="replace")[-3000:] if path.is_file() else "(no log)"


def _profile(folder: Path, name: str, model: str, entrypoint: str, flags: dict[str, Any], env: dict[str, str]) -> None:
    spec = ProfileSpec(name=name, description="real CPU tier, tiny Llama with fixed weights", model_path=model,
                       entrypoint=entrypoint, flags=flags, env=env)
    (folder / f"{name}.toml").write_text(dump_profile(spec), encoding="utf-8")


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    v_env, s_env = vllm_env(), sglang_env()
    root = tmp_path_factory.mktemp("cross-engine")
    folder = root / "profiles"
    folder.mkdir()
    model = v_env["MODEL"]
    _profile(folder, SG, model, "sglang.launch_server", SGLANG_FLAGS, {"SGLANG_USE_CPU_ENGINE": "1"})
    _profile(folder, VL, model, "vllm.entrypoints.openai.api_server", VLLM_FLAGS, VLLM_ENV)
    (root / "data").mkdir()
    db_url = f"sqlite:///{root / 'data' / 'pitwall.db'}"
    engine = make_engine(db_url)
    settings = Settings(data_dir=root / "data", database_url=db_url, profiles_dir=folder)
    ids, urls = {}, {}
    for name, eng, py in ((SG, "sglang", s_env["PYTHON"]), (VL, "vllm", v_env["PYTHON"])):
        urls[name] = f"http://127.0.0.1:{free_port()}"
        srv = repo.upsert_server(engine, name=name, base_url=urls[name], managed=True, python=py, profile=name,
                                 engine=eng, log_path=str(root / "data" / "logs" / f"{name}.log"))
        ids[name] = int(srv.id)  # type: ignore[arg-type]
    supervisor, handlers = runner_parts(settings, engine, auto_start=False)
    collectors, errors = build_collectors({"canary_interval_s": 0})
    assert not errors, errors
    for c in collectors:
        c.interval_s = INTERVALS.get(c.name, c.interval_s)
    runner = Runner(engine, collectors, supervisor=supervisor, intent_handlers=handlers, tick_s=0.1)
    thread = threading.Thread(target=runner.run, name="pitwall-runner", daemon=True)
    thread.start()
    r = Rig(engine, settings, ids, urls, runner, v_env, {})
    try:
        for name in (VL, SG):  # one after the other: two starts at once would share 2 cores
            final = r.request("launch", name)
            assert final.state == "done", f"{final.message}\n{r.log(name)}"
        yield r
    finally:
        runner.stop()
        thread.join(180)
        for sid in ids.values():
            latest = repo.latest_launch(engine, server_id=sid)
            if latest is not None and latest.pid and latest.ended_at is None:
                import signal

                try:  # never leave a real server behind
                    os.killpg(latest.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        engine.dispose()
        assert not thread.is_alive(), "the runner thread did not stop"


def _wait(cond: Any, timeout: float, what: str) -> Any:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _sweep(rig: Rig, name: str, baseline: int | None = None) -> dict[str, Any]:
    launch = repo.latest_launch(rig.engine, server_id=rig.ids[name])
    assert launch is not None
    spec = SweepSpec(url=rig.urls[name], api="completions", levels=[1, 4], requests=REQUESTS, warmup=1, timeout_s=120,
                     workload=WORKLOAD, server_id=rig.ids[name], launch_id=launch.id, name=f"{name} c1/c4",
                     baseline_run_id=baseline)
    report = asyncio.run(run_sweep(spec, engine=rig.engine)).to_dict()
    assert report["status"] == "done", report.get("error")
    rig.runs[name] = int(report["run_id"])
    return report


def test_both_engines_run_from_their_profiles(rig: Rig) -> None:
    for name, version in ((SG, "0.5.23"), (VL, rig.vllm["VLLM_VERSION"])):
        assert httpx.get(f"{rig.urls[name]}/health", timeout=30).status_code == 200
        launch = _wait(lambda n=name: (la := repo.latest_launch(rig.engine, server_id=rig.ids[n])) and
                       la.engine_version and la, 60, f"{name}'s engine version from its API")
        assert launch.engine_version == version and launch.profile_name == name


#: the families the engine's mapping needs, in the live payload and in the recorded fixture (a new
#: capture is needed the day they differ)
FAMILIES = {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
            "vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:prompt_tokens", "vllm:generation_tokens",
            "vllm:prompt_tokens_cached", "vllm:num_preemptions", "vllm:request_success",
            "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
            "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds"}


def test_the_live_log_and_metrics_read_as_recorded(rig: Rig) -> None:
    body = {"model": "tiny", "prompt": "hello world", "max_tokens": 16, "temperature": 0}
    assert httpx.post(f"{rig.urls[VL]}/v1/completions", json=body, timeout=60).status_code == 200
    live = set(parse_metrics(httpx.get(f"{rig.urls[VL]}/metrics", timeout=30).text).families)
    recorded = set(parse_metrics((FIXTURES / "vllm-0.32.0-cpu-metrics.prom").read_text()).families)
    assert FAMILIES <= live and FAMILIES <= recorded, (FAMILIES - live, FAMILIES - recorded)

    def stats() -> list[Any]:
        text = (Path(rig.settings.data_dir) / "logs" / f"{VL}.log").read_text(errors="replace")
        return [r for x in text.splitlines() if (r := parse_line(x, datetime.now())) is not None]

    records = _wait(lambda: (got := stats()) and any(r.kind == "stats" for r in got) and got, 60,
                    "a stats line in the vLLM server's log (VLLM_LOG_STATS_INTERVAL=1)")
    last = [r for r in records if r.kind == "stats"][-1]
    assert {"prompt_throughput", "gen_throughput", "running_req", "queue_req", "kv_cache_usage"} <= set(last.fields)
    assert any(r.kind == "server_ready" for r in records)


def test_a_probe_of_the_real_vllm_server_has_exact_percentiles(rig: Rig) -> None:
    _sweep(rig, SG)  # the comparison's baseline, on the same workload
    report = _sweep(rig, VL, baseline=rig.runs[SG])
    df = repo.probe_requests(rig.engine, run_id=rig.runs[VL])
    assert len(df) == 2 * (REQUESTS + 1)
    for lv, level in zip(report["levels"], (1.0, 4.0), strict=True):
        rows = df[(df.level == level) & (~df.warmup.astype(bool))]
        assert len(rows) == REQUESTS and rows.ok.astype(bool).all() and (rows.tokens_out == 32).all()
        for key in ("ttft_s", "e2e_s", "tpot_s"):
            vals = rows[key].to_numpy(dtype=float)
            assert [lv[key]["p50"], lv[key]["p95"], lv[key]["p99"]] == np.percentile(vals, [50, 95, 99]).tolist()
            assert lv[key]["max"] == vals.max()
    cons = report["consistency"]
    assert cons["baseline_run_id"] == rig.runs[SG] and cons["compared"] == 2 * (REQUESTS + 1), cons  # warm-ups too
    assert 0 <= cons["differing"] <= cons["compared"]


def test_the_vllm_collectors_fill_the_store_from_the_live_server(rig: Rig) -> None:
    sid = rig.ids[VL]

    def have() -> bool:
        names = set(repo.series_names(rig.engine, server_id=sid, prefix="metrics.")) | set(
            repo.series_names(rig.engine, server_id=sid, prefix="log."))
        return NEEDED <= names

    _wait(have, 120, "every figure the scorecard reads, from the vLLM server's /metrics and log")
    state = repo.load_state(rig.engine, key=f"vllm_metrics:{sid}:window") or {}
    assert not NEEDED & set(state.get("absent") or []), state.get("absent")
    errors = repo.list_events(rig.engine, server_id=sid, kinds=["collector_error"]).to_dict("records")
    launch = repo.latest_launch(rig.engine, server_id=sid)
    assert launch is not None and launch.ready_at is not None
    # a read that missed its deadline while two real servers share two cores is the host, not a defect
    busy = ("NVML", "did not finish within", "took longer than")
    late = [e["message"] for e in errors if e["ts"] > launch.ready_at + 5 and not any(b in e["message"] for b in busy)]
    assert late == []


def test_the_engines_compare_on_one_workload(rig: Rig, tmp_path: Path) -> None:
    if set(rig.runs) != {SG, VL}:
        pytest.skip("needs test_a_probe_of_the_real_vllm_server_has_exact_percentiles to have run first")
    cards = [build_scorecard(rig.engine, run_id=rig.runs[SG]), build_scorecard(rig.engine, run_id=rig.runs[VL])]
    assert [c.subject["engine"] for c in cards] == ["sglang", "vllm"]
    cmp = compare(cards)
    assert cmp.comparable, cmp.summary  # one workload fingerprint on both engines
    assert {"key": "engine", "values": ["SGLang", "vLLM"]} in cmp.config_diff
    assert cmp.outputs[0].startswith("Outputs: ") and f"of {2 * (REQUESTS + 1)} requests" in cmp.outputs[0]
    verdicts = {d.key: d.verdicts[1] for d in cmp.deltas}
    assert verdicts["ttft_p50_s"] in ("better", "worse", "tie", "same")
    if cards[0].value("radix_hit_rate") is not None and cards[1].value("radix_hit_rate") is not None:
        assert verdicts["radix_hit_rate"] == "different definitions"
    md = to_markdown(cards, cmp)
    assert "vLLM" in md and "SGLang" in md and cmp.outputs[0] in md.replace("\\", "")
    out = Path(os.environ.get("PITWALL_CROSS_ENGINE_MD") or tmp_path / "comparison.txt")
    out.write_text(md, encoding="utf-8")
    if os.environ.get("PITWALL_CROSS_ENGINE_MD"):  # the store beside it, to open the Compare page on
        import sqlite3

        src = sqlite3.connect(str(Path(rig.settings.data_dir) / "pitwall.db"))
        dst = sqlite3.connect(str(out.with_suffix(".db")))
        src.backup(dst)
        src.close()
        dst.close()


def test_a_relaunch_vllm_refuses_at_start_rolls_back(rig: Rig) -> None:
    folder = rig.settings.profiles_dir
    _profile(Path(folder), "xe-vllm-too-long", rig.vllm["MODEL"], "vllm.entrypoints.openai.api_server",
             {**VLLM_FLAGS, "max-model-len": 100000}, VLLM_ENV)
    before = repo.latest_launch(rig.engine, server_id=rig.ids[VL])
    final = rig.request("relaunch", VL, profile="xe-vllm-too-long")
    assert final.state == "failed", final.message
    assert "rolled back to profile xe-vllm" in final.message, final.message
    after = repo.latest_launch(rig.engine, server_id=rig.ids[VL])
    assert after is not None and before is not None and after.id != before.id
    assert after.profile_name == VL and after.argv == before.argv and after.ready_at is not None
    assert httpx.get(f"{rig.urls[VL]}/health", timeout=30).status_code == 200
    kinds = {e["kind"] for e in repo.list_events(rig.engine, server_id=rig.ids[VL]).to_dict("records")}
    assert {"relaunch_failed", "rollback"} <= kinds
