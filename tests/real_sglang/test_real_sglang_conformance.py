"""Conformance: the bundled simulator against the real SGLang 0.5.23 server, same requests to both.

Each comparison is its own test, so a failure names the difference:
- log line forms (`line_shape`: timestamps and numbers masked, `<dev> graph`) of the ready,
  startup, Prefill/Decode and access lines;
- /metrics families: presence, type, label names and histogram buckets, one test per family of
  the real capture (tests/fixtures/sglang-0.5.23-real-cpu-metrics.prom), plus "no invented
  families";
- JSON key sets of /generate (plain, stream chunks), OpenAI stream chunks and usage,
  /server_info, /model_info, /v1/loads, /v1/models, and the /health status and body.

Differences that come from the hardware, not the server (CPU here, a simulated GPU there) are
masked on purpose: `cuda graph`/`cpu graph`, `available_gpu_mem`/`available_cpu_mem`, label and
field *values*. One real server and one simulator for the whole module.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from real_sglang_helpers import REPO, line_shape, rs, sse_json

pytestmark = [pytest.mark.real_sglang, pytest.mark.slow]

FIXTURE_PROM = REPO / "tests" / "fixtures" / "sglang-0.5.23-real-cpu-metrics.prom"
SIM_ENTRY = REPO / "simulator" / "launch_server.py"
TIMEOUT = httpx.Timeout(120.0)
SHARED = "A shared system prompt is repeated so the radix cache can reuse its tokens. " * 2
LOG_NEEDLES = {
    "ready": rs.READY_LINE,
    "prefill": "] Prefill batch, ",
    "decode": "] Decode batch, ",
    "uvicorn_running": "Uvicorn running on",
    "load_weight_end": "Load weight end",
    "kv_cache_allocated": "KV Cache is allocated",
    "startup_summary": "max_total_num_tokens=",
    "access_post_generate": '"POST /generate HTTP/1.1" 200',
    "access_get_metrics": '"GET /metrics HTTP/1.1" 200',
}


def _families_in(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


REAL_FAMILIES = sorted(_families_in(FIXTURE_PROM.read_text())) if FIXTURE_PROM.exists() else []


# ---- the two servers ----------------------------------------------------------------------------

class SimServer:
    """`python -m simulator.launch_server` with the real server's flags, log to a file."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.port = rs.free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.argv = [sys.executable, "-m", "simulator.launch_server", "--model-path", env["MODEL"],
                     "--host", "127.0.0.1", "--port", str(self.port), *rs.BASE_FLAGS]
        self.proc: subprocess.Popen[bytes] | None = None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self, timeout_s: float = 120.0) -> SimServer:
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=REPO)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if rs.READY_LINE in self.log_text():
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"simulator exited {self.proc.returncode}:\n{self.log_text()[-2000:]}")
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"simulator not ready within {timeout_s:.0f} s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def _simulator_runs() -> str | None:
    """None when `python -m simulator.launch_server --help` works, else why not."""
    if not SIM_ENTRY.exists():
        return "simulator not built yet (simulator/launch_server.py missing)"
    proc = subprocess.run([sys.executable, "-m", "simulator.launch_server", "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False)
    if proc.returncode != 0:
        return f"simulator not built yet (--help exits {proc.returncode}: {proc.stderr.strip()[-200:]})"
    return None


def _traffic(base: str) -> dict[str, Any]:
    """The same request script for both servers; returns parsed observations."""
    obs: dict[str, Any] = {}
    c = httpx.Client(base_url=base, timeout=TIMEOUT)
    r = c.get("/health")
    obs["health"] = (r.status_code, r.content)
    for path in ("/server_info", "/model_info", "/v1/loads", "/v1/models"):
        r = c.get(path)
        obs[path] = r.json() if r.status_code == 200 else {"<status>": r.status_code}
    sp = {"max_new_tokens": 12, "temperature": 0, "ignore_eos": True}
    obs["generate"] = c.post("/generate", json={"text": "hello world", "sampling_params": sp}).json()
    with c.stream("POST", "/generate", json={"text": "hello world", "sampling_params": sp,
                                              "stream": True}) as r:
        obs["generate_stream_ctype"] = r.headers["content-type"]
        obs["generate_stream"] = sse_json(r.read())
    for i, tail in enumerate(("First question?", "Second question?")):
        obs[f"shared_{i}"] = c.post("/generate", json={"text": SHARED + tail, "sampling_params": sp}).json()

    def one(i: int) -> None:
        body = {"text": f"story {i}", "stream": True,
                "sampling_params": {"max_new_tokens": 24, "temperature": 0, "ignore_eos": True}}
        with httpx.stream("POST", f"{base}/generate", json=body, timeout=TIMEOUT) as resp:
            resp.read()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    common = {"model": "default", "max_tokens": 4, "temperature": 0, "stream": True,
              "stream_options": {"include_usage": True}}
    with c.stream("POST", "/v1/completions", json={**common, "prompt": "hello world"}) as r:
        obs["completions_stream"] = sse_json(r.read())
    chat = {**common, "messages": [{"role": "user", "content": "hi there"}]}
    with c.stream("POST", "/v1/chat/completions", json=chat) as r:
        obs["chat_stream"] = sse_json(r.read())
    obs["metrics"] = _families_in(c.get("/metrics").text)
    c.close()
    return obs


#: the access line of _traffic's final request: once a log has one more of it, the traffic is logged
LAST_LINE = LOG_NEEDLES["access_get_metrics"]
FLUSH_WAIT_S = 30.0


def _last_lines_logged(servers: dict[str, Any], before: dict[str, int]) -> dict[str, str]:
    """Each server's log text once it holds one more LAST_LINE than `before` (its count before
    the traffic) and a line of every LOG_NEEDLES kind, polled for at most FLUSH_WAIT_S; after
    that the logs as they are, and the comparisons name what is missing."""
    deadline = time.monotonic() + FLUSH_WAIT_S
    while True:
        logs = {name: s.log_text() for name, s in servers.items()}
        if all(text.count(LAST_LINE) > before[name] and all(n in text for n in LOG_NEEDLES.values())
               for name, text in logs.items()) or time.monotonic() >= deadline:
            return logs
        time.sleep(0.1)


@pytest.fixture(scope="module")
def both(request: pytest.FixtureRequest, sglang_cpu_env: dict[str, str],
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    why = _simulator_runs()
    if why:
        pytest.skip(why)
    real_server = request.getfixturevalue("real_server")  # only started when the simulator runs
    sim = SimServer(sglang_cpu_env, tmp_path_factory.mktemp("sim") / "sim.log").start()
    try:
        servers = {"real": real_server, "sim": sim}
        before = {name: s.log_text().count(LAST_LINE) for name, s in servers.items()}
        out = {name: _traffic(s.base_url) for name, s in servers.items()}
        for name, text in _last_lines_logged(servers, before).items():
            out[name]["log"] = text
        yield out
    finally:
        sim.stop()


# ---- comparisons ----------------------------------------------------------------------------------

_DEV = [(re.compile(r"available_(?:gpu|cpu)_mem"), "available_<dev>_mem")]


def _shapes(log: str, needle: str) -> set[str]:
    out = set()
    for ln in log.splitlines():
        if needle in ln:
            shape = line_shape(ln)
            for pat, rep in _DEV:
                shape = pat.sub(rep, shape)
            out.add(shape)
    return out


@pytest.mark.parametrize("kind", sorted(LOG_NEEDLES))
def test_log_line_forms_match(both: dict[str, dict[str, Any]], kind: str) -> None:
    needle = LOG_NEEDLES[kind]
    real, sim = _shapes(both["real"]["log"], needle), _shapes(both["sim"]["log"], needle)
    assert real, f"real server logged no {kind} line (test traffic too small?)"
    assert sim == real, f"{kind} line forms differ:\n only real: {sorted(real - sim)}\n only sim: {sorted(sim - real)}"


def _family_sig(fam: Any) -> dict[str, Any]:
    labels: set[str] = set()
    buckets: set[str] = set()
    for s in fam.samples:
        labels |= set(s.labels) - {"le", "quantile"}
        if s.name.endswith("_bucket"):
            buckets.add(s.labels["le"])
    return {"type": fam.type, "labels": sorted(labels), "buckets": sorted(buckets, key=float)}


@pytest.mark.parametrize("family", REAL_FAMILIES)
def test_metric_family_conforms(both: dict[str, dict[str, Any]], family: str) -> None:
    real = both["real"]["metrics"].get(family)
    sim = both["sim"]["metrics"].get(family)
    assert real is not None, f"{family} in the golden capture but not on the live real server"
    assert sim is not None, f"simulator lacks metric family {family} ({real.type})"
    real_sig, sim_sig = _family_sig(real), _family_sig(sim)
    diff = {k: {"real": real_sig[k], "sim": sim_sig[k]} for k in real_sig if real_sig[k] != sim_sig[k]}
    assert not diff, f"{family} differs: {diff}"


def test_simulator_invents_no_metric_family(both: dict[str, dict[str, Any]]) -> None:
    extra = sorted(set(both["sim"]["metrics"]) - set(both["real"]["metrics"]))
    assert not extra, f"simulator emits families the real server does not: {extra}"


def _keys(obj: Any) -> set[str]:
    return set(obj) if isinstance(obj, dict) else {f"<{type(obj).__name__}>"}


KEYSETS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "health status and body": lambda o: o["health"],
    "/server_info keys": lambda o: _keys(o["/server_info"]),
    "/server_info internal_states[0] keys": lambda o: _keys(o["/server_info"].get("internal_states", [{}])[0]),
    "/model_info keys": lambda o: _keys(o["/model_info"]),
    "/v1/loads keys": lambda o: _keys(o["/v1/loads"]),
    "/v1/loads loads[0] keys": lambda o: _keys(o["/v1/loads"].get("loads", [{}])[0]),
    "/v1/models data[0] keys": lambda o: _keys(o["/v1/models"].get("data", [{}])[0]),
    "/generate keys": lambda o: _keys(o["generate"]),
    "/generate meta_info keys": lambda o: _keys(o["generate"].get("meta_info")),
    "/generate finish_reason": lambda o: o["generate"]["meta_info"].get("finish_reason"),
    "/generate stream content-type": lambda o: o["generate_stream_ctype"],
    # the real server may put two tokens in one chunk when it is busy, so the chunk count varies
    # run to run; what must match is the tokens the stream delivers, and at most one chunk each
    "/generate stream tokens": lambda o: o["generate_stream"][-1]["meta_info"]["completion_tokens"],
    "/generate stream at most one chunk per token": lambda o: (
        len(o["generate_stream"]) <= o["generate_stream"][-1]["meta_info"]["completion_tokens"]),
    "/generate stream first meta_info keys": lambda o: _keys(o["generate_stream"][0].get("meta_info")),
    "/generate stream last meta_info keys": lambda o: _keys(o["generate_stream"][-1].get("meta_info")),
    "/generate shared-prefix meta_info keys": lambda o: _keys(o["shared_1"].get("meta_info")),
    "completions first chunk keys": lambda o: _keys(o["completions_stream"][0]),
    "completions choice keys": lambda o: _keys(o["completions_stream"][0]["choices"][0]),
    "completions usage chunk": lambda o: (o["completions_stream"][-1]["choices"],
                                          sorted(_keys(o["completions_stream"][-1]["usage"]))),
    "completions usage prompt_tokens_details keys":
        lambda o: _keys(o["completions_stream"][-1]["usage"].get("prompt_tokens_details")),
    "chat first chunk keys": lambda o: _keys(o["chat_stream"][0]),
    "chat first delta keys": lambda o: _keys(o["chat_stream"][0]["choices"][0]["delta"]),
    "chat middle delta keys": lambda o: _keys(o["chat_stream"][1]["choices"][0]["delta"]),
    "chat choice keys": lambda o: _keys(o["chat_stream"][0]["choices"][0]),
    "chat usage chunk keys": lambda o: _keys(o["chat_stream"][-1]),
    "chat usage keys": lambda o: _keys(o["chat_stream"][-1].get("usage")),
}


@pytest.mark.parametrize("what", sorted(KEYSETS))
def test_endpoint_json_shape_matches(both: dict[str, dict[str, Any]], what: str) -> None:
    get = KEYSETS[what]
    real, sim = get(both["real"]), get(both["sim"])
    if isinstance(real, set) and isinstance(sim, set):
        assert sim == real, f"{what}: only real {sorted(real - sim)}; only sim {sorted(sim - real)}"
    else:
        assert sim == real, f"{what}: real {real!r} != sim {sim!r}"


def test_shared_prefix_hits_cache_on_both(both: dict[str, dict[str, Any]]) -> None:
    for side in ("real", "sim"):
        meta = both[side]["shared_1"]["meta_info"]
        assert 0 < meta["cached_tokens"] < meta["prompt_tokens"], side
