"""Pitwall itself against the real SGLang 0.5.23 server on CPU: launched by Pitwall's launcher.

One real Runner (runner/loop.py) runs in a thread with the registry's real collectors
(log, metrics, api, gpu; canary off) and the launcher's supervisor (cli/wiring.py).
A managed Server row points at the `make sglang-cpu` environment's Python; its profiles are
written into tmp_path from that environment (real_sglang_rig.py says why they are not shipped).

The module starts the server twice (~25-35 s each on this machine): the `launch` intent of profile
`real-cpu` in the fixture, and the `relaunch` to `real-cpu-no-radix` in the LAST test (tests run in
file order; the ones before it share launch A). Skips visibly without the environment (fails with
PITWALL_REQUIRE_REAL_SGLANG=1), as the rest of the tier.

Every figure Pitwall stored is checked against the real server directly: its log file parsed here
independently, its /metrics and /server_info read here, numpy over the stored probe requests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families
from real_sglang_helpers import rs
from real_sglang_rig import Rig, field_sum, log_batches, running_rig, wait_for, write_profile
from sqlmodel import select

from collectors.probe.sweep import SweepSpec, run_sweep
from collectors.probe.workloads import WorkloadSpec
from launching import launcher
from launching.profiles import load_file
from storage import repo
from storage.models import Sample

pytestmark = [pytest.mark.real_sglang, pytest.mark.slow, pytest.mark.timeout(900)]

PROFILES: dict[str, dict[str, Any]] = {
    "real-cpu": {},
    "real-cpu-no-radix": {"disable-radix-cache": True},
}
SHARED = "A shared system prompt is repeated so the radix cache can reuse its tokens. " * 3
TIMEOUT = httpx.Timeout(120.0)


@pytest.fixture(scope="module")
def rig(sglang_cpu_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    root = tmp_path_factory.mktemp("pitwall-real")
    with running_rig(sglang_cpu_env, root, PROFILES, default="real-cpu") as r:
        final = r.request("launch")
        assert final.state == "done", f"{final.message}\n{r.log_path.read_text()[-3000:]}"
        yield r


def _generate(base: str, text: str, n: int) -> dict[str, Any]:
    body = {"text": text, "sampling_params": {"max_new_tokens": n, "temperature": 0, "ignore_eos": True}}
    r = httpx.post(f"{base}/generate", json=body, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return dict(r.json())


def _prom(base: str) -> dict[str, float]:
    """Unlabelled-sum value of every sample name in the real /metrics."""
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(httpx.get(f"{base}/metrics", timeout=TIMEOUT).text):
        for s in fam.samples:
            out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def _values(rig: Rig, metric: str, since: float = 0.0, until: float | None = None) -> np.ndarray:
    return repo.sample_values(rig.engine, server_id=rig.sid, metric=metric, since=since, until=until)


def _launch_values(rig: Rig, metric: str, launch_id: int | None) -> np.ndarray:
    """The stored values of `metric` attributed to one launch."""
    q = select(Sample.value).where(Sample.server_id == rig.sid, Sample.metric == metric, Sample.launch_id == launch_id)
    with rig.engine.connect() as conn:
        return np.asarray(conn.execute(q).scalars().all(), dtype=float)


def _wait_values(rig: Rig, metric: str, timeout: float) -> np.ndarray:
    """The stored values of `metric` once there is at least one."""
    found: list[np.ndarray] = []

    def have() -> bool:
        found[:] = [_values(rig, metric)]
        return bool(found[0].size)

    wait_for(have, timeout, f"a {metric} sample")
    return found[0]


def _log_files(rig: Rig) -> list[Path]:
    """Every launch's log, oldest first: each launch starts a fresh file and the runner renames the
    previous one to `<name>.log.<UTC stamp>` (runner/launch_logs.py)."""
    return [*sorted(rig.log_path.parent.glob(rig.log_path.name + ".*")), rig.log_path]


def _log_caught_up(rig: Rig, until: float) -> bool:
    """Pitwall's log.* prefill/decode sums over [0, until) equal the real log files'."""
    batches = log_batches("".join(p.read_text(errors="replace") for p in _log_files(rig)))
    for kind, key, metric in (
        ("prefill", "#new-token", "log.prefill_new_token"),
        ("prefill", "#cached-token", "log.prefill_cached_token"),
        ("decode", "gen throughput (token/s)", "log.gen_throughput_tok_s"),
    ):
        want = field_sum(batches, kind, key, 0.0, until)
        got = repo.sample_sum(rig.engine, server_id=rig.sid, metric=metric, since=0.0, until=until)
        if (round(got[0], 6), got[1]) != (round(want[0], 6), want[1]):
            return False
    return True


def _close_window(rig: Rig) -> float:
    """The next whole second, returned once the real log holds a Prefill/Decode line stamped at or
    after it: the scheduler writes its lines in order (PYTHONUNBUFFERED), so every line stamped
    before it is then in the file.

    Log prefixes have one-second resolution and /health keeps adding Prefill lines, so Pitwall's
    samples are compared with the file over [.., this second), a window that no longer grows.
    While no later line has come, a /health_generate (one token, stamped after the window) makes one.
    """
    boundary = float(int(time.time()) + 1)

    def closed() -> bool:
        if time.time() < boundary:
            return False
        if any(b.ts >= boundary for b in log_batches(rig.log_path.read_text(errors="replace"))):
            return True
        httpx.get(f"{rig.base_url}/health_generate", timeout=TIMEOUT)
        return False

    wait_for(closed, 60, f"a real log line stamped at or after {boundary:.0f} (the window's end)")
    return boundary


# ---------------------------------------------------------------------------------------------


def test_launch_row_records_the_real_launch(rig: Rig) -> None:
    launch = repo.latest_launch(rig.engine, server_id=rig.sid)
    assert launch is not None and launch.status == "ready" and launch.profile_name == "real-cpu"
    argv = launch.argv or []
    assert argv[:3] == [rig.env["PYTHON"], "-m", "sglang.launch_server"]
    for flag, value in (("--device", "cpu"), ("--attention-backend", "torch_native"),
                        ("--load-format", "dummy"), ("--max-total-tokens", "4096"),
                        ("--decode-log-interval", "5"), ("--port", str(rig.port))):
        assert f"{flag}={value}" in argv, flag  # one --flag=value token per flag (launch sandbox)
    assert "--disable-overlap-schedule" in argv and "--disable-radix-cache" not in argv
    assert launch.env == {"SGLANG_USE_CPU_ENGINE": "1", "PYTHONUNBUFFERED": "1"}
    assert rs.READY_LINE in rig.log_path.read_text()
    assert rs.STUB_MARKER not in rig.log_path.read_text()  # the sgl_kernel shim was never called


def test_api_collector_records_real_server_args_and_version(rig: Rig) -> None:
    latest = repo.latest_launch(rig.engine, server_id=rig.sid)
    assert latest is not None and latest.id is not None
    lid = latest.id
    key = f"sglang_api:{rig.sid}:info"
    state = wait_for(lambda: (s := repo.load_state(rig.engine, key=key)) and s.get("launch_id") == lid and s,
                     60, "the API collector's server info of launch A")
    assert state["version"] == "0.5.23"
    launch = repo.get_launch(rig.engine, launch_id=lid)
    assert launch is not None and launch.engine_version == "0.5.23"
    real = httpx.get(f"{rig.base_url}/server_info", timeout=TIMEOUT).json()
    args = launch.server_args or {}
    for k in ("device", "attention_backend", "max_total_tokens", "disable_radix_cache", "port", "model_path"):
        assert args[k] == real[k], k
    assert (args["device"], args["attention_backend"], args["max_total_tokens"]) == ("cpu", "torch_native", 4096)
    assert args["disable_radix_cache"] is False
    ready_at = float(launch.ready_at or 0)
    # Before the launch the server was down (0 is right there); from ready on it is up.
    wait_for(lambda: _values(rig, "api.health_ok", since=ready_at).size, 30, "api.health_ok after ready")
    assert set(_values(rig, "api.health_ok", since=ready_at).tolist()) == {1.0}


def test_log_collector_parses_the_real_log(rig: Rig) -> None:
    for tail in ("one", "two", "three"):
        _generate(rig.base_url, SHARED + tail, 12)  # 12 decode steps: Decode lines every 5
    cutoff = _close_window(rig)
    wait_for(lambda: _log_caught_up(rig, cutoff), 60, "log.* sums equal to the real log's")
    batches = log_batches(rig.log_path.read_text(errors="replace"))
    n_prefill = len([b for b in batches if b.kind == "prefill" and b.ts < cutoff])
    n_decode = len([b for b in batches if b.kind == "decode" and b.ts < cutoff])
    assert n_prefill >= 3 and n_decode >= 3
    # One sample per record: #new-seq per Prefill line, #running-req on both kinds.
    assert _values(rig, "log.prefill_new_seq", until=cutoff).size == n_prefill
    assert _values(rig, "log.running_req", until=cutoff).size == n_prefill + n_decode
    usage = _values(rig, "log.token_usage", until=cutoff)
    assert usage.size == n_prefill + n_decode and ((usage >= 0) & (usage <= 1)).all()
    want_tokens = field_sum(batches, "decode", "#token", 0.0, cutoff)
    assert repo.sample_sum(rig.engine, server_id=rig.sid, metric="log.num_token", since=0, until=cutoff) == want_tokens
    # The ready line was in what the log collector read, yet a managed server gets ONE
    # server_ready per start: the supervisor's (it owns lifecycle events of what it starts).
    assert rs.READY_LINE in rig.log_path.read_text()
    launch = repo.latest_launch(rig.engine, server_id=rig.sid)
    assert launch is not None
    ready = repo.list_events(rig.engine, server_id=rig.sid, kinds=["server_ready"]).to_dict("records")
    assert [(e["launch_id"], e["message"].split(" (")[0]) for e in ready] == [
        (launch.id, "real-cpu ready under profile real-cpu")], ready


def test_metrics_collector_reads_real_metrics(rig: Rig) -> None:
    cap = _wait_values(rig, "metrics.max_total_num_tokens", 30)
    assert set(cap.tolist()) == {_prom(rig.base_url)["sglang:max_total_num_tokens"]}
    t0 = time.time()
    for tail in ("alpha", "beta", "gamma", "delta"):
        _generate(rig.base_url, SHARED + tail, 4)
    for key in ("metrics.requests_per_s", "metrics.prompt_tokens_per_s", "metrics.generation_tokens_per_s"):
        def positive(key: str = key) -> bool:
            return bool((_values(rig, key, since=t0) > 0).any())

        wait_for(positive, 30, f"{key} > 0 after requests")
    names = repo.metric_names(rig.engine, server_id=rig.sid, prefix="metrics.")
    for key in ("metrics.num_running_reqs", "metrics.num_queue_reqs", "metrics.token_usage", "metrics.num_used_tokens"):
        assert key in names, (key, names)
    launch = repo.latest_launch(rig.engine, server_id=rig.sid)
    assert launch is not None and launch.ready_at is not None
    errors = repo.list_events(rig.engine, kinds=["collector_error"], since=launch.ready_at).to_dict("records")
    # Scrapes failed while the server was not yet started (connection refused: right). After
    # ready, the GPU collector's one "NVML is unavailable" note is expected on this CPU-only host;
    # any other collector_error is a collector failing against the real server.
    assert [e["message"] for e in errors if "NVML" not in e["message"]] == []


def test_probe_sweep_has_exact_percentiles(rig: Rig) -> None:
    launch = repo.latest_launch(rig.engine, server_id=rig.sid)
    assert launch is not None
    spec = SweepSpec(url=rig.base_url, api="generate", levels=[1, 4], requests=8, warmup=1, timeout_s=120,
                     workload=WorkloadSpec(max_new_tokens=8, ignore_eos=True), server_id=rig.sid,
                     launch_id=launch.id, name="real-cpu c1/c4")
    report = asyncio.run(run_sweep(spec, engine=rig.engine)).to_dict()
    assert report["status"] == "done", report.get("error")
    df = repo.probe_requests(rig.engine, run_id=report["run_id"])
    assert len(df) == 2 * (8 + 1)
    for lv, level in zip(report["levels"], (1.0, 4.0), strict=True):
        rows = df[(df.level == level) & (~df.warmup.astype(bool))]
        assert len(rows) == 8 and rows.ok.astype(bool).all() and (rows.tokens_out == 8).all()
        assert lv["requests"] == 8 and lv["ok"] == 8 and not lv["errors"]
        for key in ("ttft_s", "e2e_s", "tpot_s"):
            vals = rows[key].to_numpy(dtype=float)
            want = np.percentile(vals, [50, 95, 99])
            assert [lv[key]["p50"], lv[key]["p95"], lv[key]["p99"]] == want.tolist(), key
            assert lv[key]["max"] == vals.max()
        # At most 7 gaps for 8 tokens: tokens that arrive in the first chunk with the first one
        # get none (client.py's rule; the real server does send 2-token first chunks at c=4).
        assert all(1 <= len(gaps) <= 7 for gaps in rows.itl_s)
        itl = np.asarray([g for gaps in rows.itl_s for g in gaps], dtype=float)
        assert [lv["itl_s"]["p50"], lv["itl_s"]["p99"]] == np.percentile(itl, [50, 99]).tolist()
    run = repo.get_probe_run(rig.engine, run_id=report["run_id"])
    assert run is not None and run.status == "done" and run.launch_id == launch.id


def test_invalid_profile_is_refused_by_the_real_parser_and_changes_nothing(rig: Rig) -> None:
    server = repo.get_server(rig.engine, name="real-cpu")
    assert server is not None
    good = launcher.validate(load_file(rig.settings.profiles_dir / "real-cpu.toml"), server, replacing=True)
    assert good.ok, good.lines()
    assert good.checked_by == f"SGLang's parser in {rig.env['PYTHON']}"
    # The same profile plus a flag 0.5.23 does not have, requested as a relaunch: the planner's
    # validation runs the real parser and the running server is left alone.
    write_profile(rig.settings.profiles_dir, rig.env, "real-cpu-bad", {"enable-radix-cache": True})
    before = repo.latest_launch(rig.engine, server_id=rig.sid)
    final = rig.request("relaunch", profile="real-cpu-bad", timeout_s=300)
    assert final.state == "failed"
    assert final.message.startswith("Nothing was changed: profile real-cpu-bad is invalid: SGLang rejected the flags: "
                                    "unrecognized arguments: --enable-radix-cache."), final.message
    after = repo.latest_launch(rig.engine, server_id=rig.sid)
    assert after is not None and before is not None and after.id == before.id and after.ended_at is None
    assert httpx.get(f"{rig.base_url}/health", timeout=TIMEOUT).status_code == 200
    flagged = repo.list_events(rig.engine, server_id=rig.sid, kinds=["bad_cli_flag"]).to_dict("records")
    assert any("--enable-radix-cache" in e["message"] for e in flagged)


def _hit_rates_since(rig: Rig, since: float) -> np.ndarray:
    """log.cache_hit_rate's samples since `since`, once there is one (at most 60 s)."""
    wait_for(lambda: _values(rig, "log.cache_hit_rate", since=since).size > 0, 60,
             "a log.cache_hit_rate sample of the workload")
    return _values(rig, "log.cache_hit_rate", since=since)


def _shared_prefix_workload(rig: Rig) -> tuple[float, float]:
    """Four requests sharing a long prefix, one after another; returns the [since, until) window."""
    since = float(int(time.time()))
    for tail in ("north", "south", "east", "west"):
        _generate(rig.base_url, SHARED + tail, 2)
    return since, _close_window(rig)


def test_relaunch_without_radix_cache_drops_the_cache_hit_rate(rig: Rig) -> None:
    a = repo.latest_launch(rig.engine, server_id=rig.sid)
    assert a is not None
    win_a = _shared_prefix_workload(rig)
    wait_for(lambda: _log_caught_up(rig, win_a[1]), 60, "the log collector to read workload A")
    cached_a, n_a = repo.sample_sum(rig.engine, server_id=rig.sid, metric="log.prefill_cached_token", since=win_a[0], until=win_a[1])
    new_a, _ = repo.sample_sum(rig.engine, server_id=rig.sid, metric="log.prefill_new_token", since=win_a[0], until=win_a[1])
    assert n_a >= 4 and cached_a > 0, (cached_a, n_a)
    # the hit rate is one sample per poll's window of prefill lines, stamped at its last line, which
    # may be the line after the window (_close_window's): read every sample since the workload began
    # (all of launch A's until the relaunch below)
    hit_a = _hit_rates_since(rig, win_a[0])
    assert hit_a.max() > 0

    final = rig.request("relaunch", profile="real-cpu-no-radix")
    assert final.state == "done", f"{final.message}\n{rig.log_path.read_text()[-3000:]}"
    info = httpx.get(f"{rig.base_url}/server_info", timeout=TIMEOUT).json()
    assert info["disable_radix_cache"] is True
    b = repo.latest_launch(rig.engine, server_id=rig.sid)
    assert b is not None and b.id != a.id and b.profile_name == "real-cpu-no-radix"
    assert "--disable-radix-cache" in (b.argv or [])
    assert (b.server_args or {}).get("disable_radix_cache") is True and b.engine_version == "0.5.23"
    assert a.id is not None
    old = repo.get_launch(rig.engine, launch_id=a.id)
    assert old is not None and old.status == "stopped" and old.ended_at is not None
    key = f"sglang_api:{rig.sid}:info"
    wait_for(lambda: (s := repo.load_state(rig.engine, key=key)) and s.get("launch_id") == b.id, 60,
             "the API collector's server info of launch B")

    win_b = _shared_prefix_workload(rig)
    wait_for(lambda: _log_caught_up(rig, win_b[1]), 60, "the log collector to read workload B")
    cached_b, n_b = repo.sample_sum(rig.engine, server_id=rig.sid, metric="log.prefill_cached_token", since=win_b[0], until=win_b[1])
    new_b, _ = repo.sample_sum(rig.engine, server_id=rig.sid, metric="log.prefill_new_token", since=win_b[0], until=win_b[1])
    # what was cached under A is computed under B
    assert n_b >= 4 and cached_b == 0 and new_b > new_a, (cached_b, new_b, new_a, cached_a)
    hit_b = _hit_rates_since(rig, win_b[0])  # launch B's, every one: no radix cache, no hit
    assert set(hit_b.tolist()) == {0.0}, hit_b
    # /metrics agrees: the token-weighted ratio (Δcached/Δprompt between scrapes) was above 0
    # under A and never under B (sglang:cached_tokens_total is absent there), and SGLang's own
    # last-prefill-batch gauge reads only 0 under B. (Its >0 moments under A are not asserted:
    # a /health prefill resets it within a scrape interval.)
    wait_for(lambda: _launch_values(rig, "metrics.cache_hit_rate", b.id).size, 30, "metrics.cache_hit_rate under B")
    assert set(_launch_values(rig, "metrics.cache_hit_rate", b.id).tolist()) == {0.0}
    assert (_launch_values(rig, "metrics.cached_token_ratio", a.id) > 0).any()
    assert not (_launch_values(rig, "metrics.cached_token_ratio", b.id) > 0).any()
    # Each launch has its own log file (the previous one renamed aside): one ready line in each,
    # one server_ready event per start.
    files = _log_files(rig)
    assert len(files) == 2 and [p.read_text().count(rs.READY_LINE) for p in files] == [1, 1]
    ready = repo.list_events(rig.engine, server_id=rig.sid, kinds=["server_ready"]).to_dict("records")
    assert sorted(e["launch_id"] for e in ready) == [a.id, b.id], ready


def test_without_radix_cache_nothing_is_cached_anywhere(rig: Rig) -> None:
    """Under launch B (`--disable-radix-cache`) a shared prefix gets no cached tokens in any of the
    server's own accounts: meta_info, its Prefill lines and /metrics. The real-server fact behind
    Pitwall's "relaunch without radix cache drops the hit rate"."""
    b = repo.latest_launch(rig.engine, server_id=rig.sid)
    if b is None or b.profile_name != "real-cpu-no-radix":
        pytest.skip("needs test_relaunch_without_radix_cache_drops_the_cache_hit_rate to have run first")
    sp = {"max_new_tokens": 2, "temperature": 0, "ignore_eos": True}
    metas = []
    for tail in ("one", "two", "three"):
        r = httpx.post(f"{rig.base_url}/generate", json={"text": SHARED + tail, "sampling_params": sp}, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        metas.append(r.json()["meta_info"])
    assert [m["cached_tokens"] for m in metas] == [0, 0, 0]
    # launch B's own log file: every Prefill line of it, /health's included
    cached = [x.fields["#cached-token"] for x in log_batches(rig.log_path.read_text(errors="replace"))
              if x.kind == "prefill"]
    assert cached and set(cached) == {0}
    fams = {f.name: f for f in text_string_to_metric_families(httpx.get(f"{rig.base_url}/metrics", timeout=TIMEOUT).text)}
    prompt = sum(s.value for s in fams["sglang:prompt_tokens"].samples if s.name.endswith("_total"))
    assert prompt >= sum(m["prompt_tokens"] for m in metas)
    # SGLang's multiprocess collector only shows a labelled counter once a child is incremented:
    # with no cache hit ever, sglang:cached_tokens_total is ABSENT (not 0) from /metrics.
    assert "sglang:cached_tokens" not in fams


# ---------------------------------------------------------------------------------------------
# Regressions of two defects first seen against the real server: a planned relaunch must not
# be reported as collector errors or as an outage. They read the relaunch test's events.


def _relaunch_window(rig: Rig) -> tuple[float, float]:
    ev = repo.list_events(rig.engine, server_id=rig.sid, kinds=["relaunch_started", "relaunch_done"]).to_dict("records")
    times = {e["kind"]: float(e["ts"]) for e in ev}
    if set(times) != {"relaunch_started", "relaunch_done"}:
        pytest.skip("needs test_relaunch_without_radix_cache_drops_the_cache_hit_rate to have run first")
    return times["relaunch_started"], times["relaunch_done"]


def test_planned_relaunch_records_no_collector_error(rig: Rig) -> None:
    since, until = _relaunch_window(rig)
    errors = repo.list_events(rig.engine, kinds=["collector_error"], since=since, until=until + 1).to_dict("records")
    assert [e["message"] for e in errors] == []


def test_planned_relaunch_records_no_health_down_warning(rig: Rig) -> None:
    since, until = _relaunch_window(rig)
    down = repo.list_events(rig.engine, server_id=rig.sid, kinds=["health_down"], since=since, until=until + 1)
    assert down.to_dict("records") == []
