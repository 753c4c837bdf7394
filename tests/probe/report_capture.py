"""What the probe's report writer wrote, captured from real sweeps against the simulator, so a
change to the writer can be checked against the writer before it (tests/probe/test_report_writer.py).

A capture holds, per sweep case: each level's input (the LevelResult: plan, records, loop lags,
CPU, start lags, stop reason, and the API arguments) with the exact JSON its `level_report` wrote,
and the key skeleton (keys in order, recursively; values left out: they are timings) of every
report stored while the sweep ran and of the one it returned.

Regenerate the fixture (only when the report's shape is meant to change) with
`python tests/probe/report_capture.py` from the repository root; it starts the simulator twice
(an LLM and an image server) on free loopback ports.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FIXTURE = HERE.parent / "fixtures" / "probe_report_writer.json"
if str(HERE.parent) not in sys.path:  # run as a script: tests/ holds pwtest
    sys.path.insert(0, str(HERE.parent))
from pwtest import free_port, stop_process  # noqa: E402

SCHEMA = '{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}'


@contextmanager
def simulator(*args: str, log: Path) -> Iterator[str]:
    """A simulator process on a free loopback port; yields its base URL once /health answers."""
    port = free_port()
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "simulator.launch_server", "--host", "127.0.0.1",
                                 "--port", str(port), "--sim-startup-s", "1", *args],
                                cwd=REPO, stdout=fh, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:  # noqa: S310 - loopback
                    if r.status == 200:
                        break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(log.read_text(errors="replace")) from None
                time.sleep(0.2)
        yield base
    finally:
        stop_process(proc)


def cases(llm: str, image: str, dead: str) -> dict[str, Any]:
    """name -> SweepSpec: every shape of level and run the writer makes."""
    from collectors.probe.sweep import SweepSpec
    from collectors.probe.workloads import WorkloadSpec

    short = WorkloadSpec(max_new_tokens=4)
    return {
        "closed": SweepSpec(url=llm, levels=[1, 2], requests=9, warmup=1, workload=short),
        "open": SweepSpec(url=llm, mode="rate", levels=[50.0], requests=9, warmup=1, workload=short),
        "multi_turn": SweepSpec(url=llm, api="chat", levels=[2], requests=8, warmup=0,
                                workload=WorkloadSpec(max_new_tokens=4, prompt_set="multi-turn", turns=2,
                                                      conversations=4)),
        "fork": SweepSpec(url=llm, levels=[2], requests=8, warmup=0,
                          workload=WorkloadSpec(max_new_tokens=4, prompt_set="fork", branches=2,
                                                conversations=4)),
        "structured": SweepSpec(url=llm, levels=[2], requests=4, warmup=0,
                                workload=WorkloadSpec(max_new_tokens=64, structured="json-schema",
                                                      structured_spec=SCHEMA)),
        "images": SweepSpec(url=image, api="images", levels=[2], requests=4, warmup=0,
                            workload=WorkloadSpec(image_steps=4, image_size="64x64")),
        "all_failed": SweepSpec(url=dead, levels=[1], requests=2, warmup=0, workload=short),
        # against "closed", the first run of a fresh database (run 1)
        "consistency": SweepSpec(url=llm, levels=[1], requests=2, warmup=0, workload=short, baseline_run_id=1),
    }


def edge_inputs() -> list[dict[str, Any]]:
    """level_report inputs no live sweep makes but the writer must keep: a level with no records
    (every figure None, the closed loop's achieved concurrency None), an open loop with one
    request (achieved rate None), an images level with nothing measured (images/min None)."""
    from collectors.probe.client import RequestRecord
    from collectors.probe.pacing import LevelPlan, LevelResult

    one = RequestRecord(level=5.0, seq=0, t_start=1.0, t_end=1.5, e2e_s=0.5, ttft_s=0.1, ok=True, tokens_out=4)
    results = [
        (LevelResult(plan=LevelPlan("concurrency", 4, requests=0, warmup=0)), "generate", {}),
        (LevelResult(plan=LevelPlan("rate", 5.0, requests=1, warmup=0), records=[one], start_lag_s=[0.001]),
         "generate", {}),
        (LevelResult(plan=LevelPlan("concurrency", 2, requests=0, warmup=0)), "images",
         {"image_steps": None, "images_per_request": 2}),
    ]
    return [level_input(r, api, kw) for r, api, kw in results]


def skeleton(value: Any) -> Any:
    """The keys of `value` in order, recursively (lists of dicts element by element); leaves, and
    lists of leaves (reasons, [lo, hi]: their length is a measurement), as None."""
    if isinstance(value, dict):
        return [[k, skeleton(v)] for k, v in value.items()]
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [skeleton(v) for v in value]
    return None


def plain(report: Any) -> Any:
    """A report (typed or a dict) as the JSON-able dict that is stored."""
    return json.loads(json.dumps(report.to_dict() if hasattr(report, "to_dict") else report, default=str))


def level_input(result: Any, api: str, kw: dict[str, Any]) -> dict[str, Any]:
    """A LevelResult and level_report's arguments as JSON (image bytes are gone by then)."""
    d = asdict(result)
    for rec in d["records"]:
        rec.pop("image_bytes", None)
        if isinstance(rec.get("detail"), dict):
            rec["detail"].pop("check", None)  # a thumbnail: level_report never reads it
    return {"result": d, "api": api, **kw}


def level_result(d: dict[str, Any]) -> Any:
    """level_input's JSON back as a LevelResult."""
    from collectors.probe.client import RequestRecord
    from collectors.probe.pacing import LevelPlan, LevelResult

    r = dict(d)
    return LevelResult(plan=LevelPlan(**r.pop("plan")), records=[RequestRecord(**x) for x in r.pop("records")],
                       **r)


def run_case(spec: Any, engine: Any, monkeypatch: Any) -> dict[str, Any]:
    """One sweep, with level_report's inputs and outputs and every stored report recorded."""
    from collectors.probe import store, sweep

    levels: list[dict[str, Any]] = []
    stored: list[Any] = []
    real_level, real_update = sweep.level_report, store.update_run

    def spy_level(result: Any, api: str = "generate", **kw: Any) -> Any:
        out = real_level(result, api, **kw)
        levels.append({"input": level_input(result, api, kw), "json": json.dumps(plain(out))})
        return out

    def spy_update(engine: Any, **kw: Any) -> None:
        if "report" in kw:
            stored.append(skeleton(plain(kw["report"])))
        real_update(engine, **kw)

    monkeypatch.setattr(sweep, "level_report", spy_level)
    monkeypatch.setattr(store, "update_run", spy_update)
    try:
        report = asyncio.run(sweep.run_sweep(spec, engine=engine))
    finally:
        monkeypatch.setattr(sweep, "level_report", real_level)
        monkeypatch.setattr(store, "update_run", real_update)
    return {"levels": levels, "stored": stored, "returned": skeleton(plain(report))}


def capture(tmp: Path, monkeypatch: Any) -> dict[str, Any]:
    from collectors.probe.cli import open_engine

    engine = open_engine(f"sqlite:///{tmp / 'capture.db'}")
    with simulator("--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--sim-speed", "20",
                   "--enable-cache-report", log=tmp / "llm.log") as llm, \
            simulator("--model-path", "Qwen/Qwen-Image", "--sim-kind", "image", "--sim-gpu", "b300",
                      "--sim-speed", "50", log=tmp / "image.log") as image:
        specs = cases(llm, image, f"http://127.0.0.1:{free_port()}")
        got = {name: run_case(spec, engine, monkeypatch) for name, spec in specs.items()}
    from collectors.probe.report import level_report

    got["edges"] = {"levels": [{"input": d, "json": json.dumps(plain(level_report(
        level_result(d["result"]), d["api"], **{k: v for k, v in d.items() if k not in ("result", "api")})))}
        for d in edge_inputs()], "stored": [], "returned": None}
    return got


if __name__ == "__main__":
    import tempfile

    import pytest

    sys.path.insert(0, str(REPO))
    with tempfile.TemporaryDirectory() as d, pytest.MonkeyPatch.context() as mp:
        got = capture(Path(d), mp)
    FIXTURE.write_text(json.dumps(got, indent=1) + "\n")
    summary = ", ".join(f"{name} ({len(case['levels'])} levels)" for name, case in got.items())
    print(f"wrote {FIXTURE.relative_to(REPO)}: {summary}")
