"""`pitwall probe --trace NAME --speed auto` on the demo's server (the simulator under the demo
profile's flags, in real time) with the demo's trace: the search grows, bisects and repeats, and
its sentence names the knee with an interval; the speeds below it meet the SLO and one above it
misses it. The search itself (grow, shrink, bisect, repeats) is checked on a made-up server."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pwtest import PY, REPO, subprocess_env
from sim_fixture import sim_server  # noqa: F401 - the module's simulator, fixture `sim`

from collectors.trace import importer
from collectors.trace.capacity import misses, search
from collectors.trace.replay_run import MAX_TRIAL_S, auto_range
from storage import repo
from storage.db import make_engine

SIM_ARGS = ["--model-path", "Qwen/Qwen2.5-7B-Instruct", "--sim-gpu", "h200", "--enable-metrics", "--enable-cache-report",
            "--mem-fraction-static", "0.85", "--max-running-requests", "64", "--sim-speed", "1"]
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def made_up(knee: float, noise: list[float] | None = None):  # type: ignore[no-untyped-def]
    """A server whose p99 TTFT crosses 0.5 s at `knee`x (shifted by `noise`, one value a call)."""
    shifts = list(noise or [])

    def measure(speed: float) -> dict:
        k = knee * (1 + (shifts.pop(0) if shifts else 0.0))
        return {"ttft_s": {"p99": 0.5 * speed / k}, "itl_s": {"p99": 0.01}, "success_rate": 1.0, "trusted": True}

    return measure


def test_the_search_finds_a_knee_and_says_its_spread() -> None:
    slo = {"ttft_p99_s": 0.5, "success_rate": 0.99}
    exact = search(made_up(5.0), slo)
    assert exact.knee is not None and 5.0 / 1.1 <= exact.knee <= 5.0 and exact.low == exact.knee
    # the interval runs to the speed that failed next to the knee: within the search's resolution
    assert exact.knee < 5.0 < exact.high <= exact.knee * 1.1
    assert [s.speed for s in exact.steps[:4]] == [1.0, 2.0, 4.0, 8.0]  # grow by 2 until a miss
    noisy = search(made_up(5.0, [0.0] * 4 + [0.1] * 3 + [-0.1] * 3 + [0.0] * 10), slo)
    assert noisy.low < noisy.high and noisy.low <= noisy.knee <= noisy.high
    assert noisy.sentence("demo", "t").startswith(f"demo holds {noisy.knee:.2g}x ({noisy.low:.2g}-{noisy.high:.2g}x) "
                                                  "of trace t within its SLO")
    slow = search(made_up(0.3), slo)  # the first speed misses: shrink until one meets
    assert slow.knee is not None and slow.knee < 0.3 and slow.steps[0].speed == 1.0 and not slow.steps[0].meets
    assert search(made_up(5000.0), slo).capped  # met at 1024x, the fastest tried
    never = search(lambda s: {"ttft_s": {"p99": 9.0}, "itl_s": {}, "success_rate": 1.0, "trusted": True}, slo)
    assert never.knee is None and "meets its SLO at no speed" in never.sentence("demo", "t")
    assert misses({"ttft_s": {"p99": 0.1}, "success_rate": 0.9, "trusted": False}, slo) == [
        "success rate 90.0 % < 99.0 %", "the client fell behind its schedule (not trusted)"]


def behind(when, knee: float = 5.0, calls: list[float] | None = None):  # type: ignore[no-untyped-def]
    """A made-up server behind a client that falls behind its schedule at the speeds `when` holds for."""
    server = made_up(knee)

    def measure(speed: float) -> dict:
        if calls is not None:
            calls.append(speed)
        return {**server(speed), "trusted": not when(speed)}

    return measure


def test_a_client_that_falls_behind_ends_the_search_and_never_blames_the_server() -> None:
    slo = {"ttft_p99_s": 0.5, "success_rate": 0.99}
    calls: list[float] = []
    at_once = search(behind(lambda s: True, calls=calls), slo)  # behind at the first speed (1x), twice
    assert calls == [1.0, 1.0] and at_once.knee is None and at_once.client_bound == 1.0  # no descent to 1/64x
    assert at_once.steps[-1].why == ["the client fell behind its schedule (not trusted)"]
    assert at_once.sentence("demo", "t") == ("demo: nothing measured of trace t; the search stopped at 1x, where the "
                                             "client fell behind the trace's schedule twice (a late replay says "
                                             "nothing of the server): run it from a less busy host")
    growing = search(behind(lambda s: s >= 4.0), slo)  # met 1x and 2x, then the client gave out at 4x
    assert growing.capped and growing.knee == 2.0 and growing.client_bound == 4.0
    assert growing.sentence("demo", "t").startswith("demo holds at least 2x of trace t within its SLO (the fastest "
                                                    "measured); the search stopped at 4x")
    # 4x met, 8x missed (the server), then the client gave out at the first bisection (5.66x)
    bisecting = search(behind(lambda s: 5.0 < s < 7.0), slo)
    assert not bisecting.capped and bisecting.client_bound == pytest.approx(32 ** 0.5)
    assert bisecting.knee == 4.0 and bisecting.high == 8.0 and bisecting.knees == [4.0]
    # the first bisection repeat finished (knee 4.76x), the second gave out at once: the finished
    # knee stands, not the median of it and the 4x the cut repeat started from
    seen: list[float] = []
    cut = search(behind(lambda s: abs(s - 32 ** 0.5) < 1e-9 and seen.count(s) > 1, calls=seen), slo, repeats=3)
    assert cut.client_bound == pytest.approx(32 ** 0.5) and cut.knees == [pytest.approx(4.757, abs=1e-3)]
    assert cut.knee == cut.low == cut.knees[0] and cut.high == pytest.approx(5.187, abs=1e-3)
    slow = search(behind(lambda s: s < 1.0, knee=0.3), slo)  # 1x missed (the server), then 0.5x behind
    assert slow.knee is None and slow.client_bound == 0.5 and [st.speed for st in slow.steps] == [1.0, 0.5]
    assert slow.sentence("demo", "t").startswith("demo misses its SLO at 1x of trace t (p99 TTFT")
    once: list[bool] = [False, True]  # behind once, then kept to time: the second trial counts
    fine = search(lambda s: {**made_up(5.0)(s), "trusted": once.pop(0) if once else True}, slo)
    assert fine.client_bound is None and fine.knee is not None and 5.0 / 1.1 <= fine.knee <= 5.0


def test_no_trial_of_the_search_lasts_over_four_minutes() -> None:
    """The search starts where one replay of the window lasts about 30 s and goes no slower than
    where one lasts MAX_TRIAL_S: an hour's window is searched from 120x down to 15x at most."""
    assert auto_range(2.0, 2.0) == (1.0, 1 / 64)  # a short window: down to 1/64x (128 s a trial)
    assert auto_range(30.0, 1024.0) == (1.0, 30.0 / MAX_TRIAL_S)
    assert auto_range(3600.0, 1024.0) == (120.0, 15.0) and 3600.0 / 15.0 == MAX_TRIAL_S
    assert auto_range(3600.0, 64.0) == (64.0, 15.0) and auto_range(3600.0, 1.0) == (1.0, 1.0)
    tried = search(made_up(0.001), {"ttft_p99_s": 0.5}, start=120.0, min_speed=15.0)
    assert tried.knee is None and min(s.speed for s in tried.steps) == 15.0


def test_speed_auto_on_the_demo(tmp_path: Path, sim: str) -> None:
    """The contract of every outcome, on the demo's server: each speed tried is a stored run; a knee
    comes with its interval, every speed past the interval missed the SLO and the sentence says so;
    a server that meets it at the fastest speed tried is said to hold at least that. (Where the
    demo's knee lies for a given SLO is measured in the note: it moves with the host's load.)

    The window is the trace's opening burst (33 requests, 38.6k input tokens in 0.8 s), whose p99
    TTFT crosses the 0.5-s target near 12x (measured alone: 11x, 11-12x), so the search grows,
    brackets and bisects in about fourteen trials of under a second each."""
    data = tmp_path / "data"
    data.mkdir()
    db = f"sqlite:///{data / 'pitwall.db'}"
    engine = make_engine(db)
    importer.store(engine, importer.build([REPO / "traces" / "demo-chat.jsonl"]))
    (tmp_path / "pitwall.toml").write_text("[slo]\nttft_p99_s = 0.5\nsuccess_rate = 0.99\n", encoding="utf-8")
    env = subprocess_env({"PITWALL_DATABASE_URL": db, "PITWALL_DATA_DIR": str(data), "PITWALL_DEMO": "off",
                          "PITWALL_CONFIG": str(tmp_path / "pitwall.toml")})
    got = subprocess.run([PY, "-m", "cli", "probe", "--url", sim, "--trace", "demo-chat", "--speed", "auto",
                          "--window", "0..1", "--max-speed", "64", "--json", "--no-progress"], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=540, check=False)
    assert got.returncode in (0, 1), got.stderr[-3000:]
    out = json.loads(got.stdout)
    assert out["slo"]["ttft_p99_s"] == 0.5 and out["slo"]["success_rate"] == 0.99  # pitwall.toml's [slo]
    steps = out["steps"]
    runs = repo.list_probe_runs(engine)
    assert len(runs) >= len(steps) and all(r.status == "done" for r in runs)  # every trial stored (retries too)
    # each trial its own prompts: none found an earlier trial's in the server's prefix cache (the
    # same prompts again would prefill nothing and make every later, faster trial look cheap)
    seeds = [r.spec["prompt_seed"] for r in runs]
    assert len(set(seeds)) == len(seeds), seeds
    bound = out["client_bound"]
    if bound is not None:  # the demo's client fell behind twice (a busy host): the search ended there
        assert steps[-1]["speed"] == bound and not steps[-1]["meets"] and f"stopped at {bound:.3g}x" in out["sentence"]
        met = [s["speed"] for s in steps if s["meets"]]
        assert (out["knee"] is None) == (not met) and got.returncode == (1 if not met else 0)
        # the knee is the median of the knees of the repeats that finished, each a speed that met
        assert out["knee"] is None or (all(k in met for k in out["knees"])
                                       and min(out["knees"]) <= out["knee"] <= max(out["knees"]))
    elif out["knee"] is None:
        assert got.returncode == 1 and not any(s["meets"] for s in steps) and "at no speed" in out["sentence"]
    elif out["capped"]:
        assert steps[-1]["meets"] and steps[-1]["speed"] == 64 and "at least 64x" in out["sentence"]
    else:
        knee = out["knee"]
        assert out["low"] <= knee < out["high"] and len(out["knees"]) == 3
        # the interval ends at a speed that failed: every trial there or above missed, and says why
        above = [s for s in steps if s["speed"] >= out["high"]]
        assert above and not any(s["meets"] for s in above) and all(s["why"] for s in above)
        assert f"{knee:.2g}x ({out['low']:.2g}-{out['high']:.2g}x) of trace demo-chat within its SLO" in out["sentence"]
