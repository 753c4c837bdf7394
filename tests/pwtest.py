"""Test helpers shared across test folders (import as `from pwtest import ...`).

Kept out of conftest.py because several conftest.py files exist and `from conftest import`
would be ambiguous between them. `pythonpath = ["tests"]` in pyproject makes this importable.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable


# Ports for the servers tests start: below the kernel's ephemeral range (a port from bind(0) is
# one the kernel may hand to an outgoing connection of any process before the server binds it:
# seen under six workers, Prometheus "bind: address already in use"), and in a slice of their own
# per pytest-xdist worker, so two workers never hand out the same port.
PORT_FLOOR = 10000
MAX_WORKERS = 16
DEMO_PORT_OFFSETS = (0, 1, 100, 101)  # the LLM demo, the image demo and their exporters


def _ephemeral_range() -> tuple[int, int]:
    try:
        lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _worker_slice() -> range:
    """This process's ports: its xdist worker's slice of [PORT_FLOOR, the ephemeral range)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    top = min(_ephemeral_range()[0], 65536)
    size = (top - PORT_FLOOR) // MAX_WORKERS
    start = PORT_FLOOR + (index % MAX_WORKERS) * size
    return range(start, start + size)


_next_port: list[int] = []  # the next port to try in this process's slice (a rotating cursor)


def _free_ports(span: int) -> int:
    """The first port p from the cursor on, in this worker's slice, with p + each DEMO_PORT_OFFSETS
    below `span` free (span 1: p alone), checked by binding; the cursor moves past p + span."""
    import random

    ports = _worker_slice()
    if not _next_port:
        _next_port.append(random.Random(os.getpid()).randrange(len(ports)))
    offsets = [o for o in DEMO_PORT_OFFSETS if o < span] or [0]
    for _ in range(len(ports)):
        i = _next_port[0] % len(ports)
        _next_port[0] = i + 1
        base = ports.start + i
        if base + span > ports.stop:
            continue
        try:
            for off in offsets:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", base + off))
        except OSError:
            continue
        _next_port[0] = i + span
        return base
    raise AssertionError(f"no free port in {ports} on 127.0.0.1")


def free_port() -> int:
    """A free loopback port for a server a test starts (this worker's own, below the ephemeral range)."""
    return _free_ports(1)


def free_demo_port() -> int:
    """A demo_port whose + 1, + 100 and + 101 are free too (the LLM demo, the image demo and their
    exporters), in this worker's slice below the ephemeral range: the kernel hands ephemeral ports
    to outgoing connections, so on a busy machine the demo's + 1 or + 100 could be taken by a
    client socket before the simulator binds it (seen once: the image demo never came up)."""
    return _free_ports(102)


def subprocess_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def wait_for(cond, timeout: float = 60.0, what: str = "condition", poll_s: float = 0.05):  # type: ignore[no-untyped-def]
    """Poll `cond()` until it is truthy and return it; AssertionError naming `what` after
    `timeout` seconds (a generous deadline for a busy 2-core CI machine, never a speed claim)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out waiting for {what}")


def stop_process(proc, timeout_s: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    """SIGTERM a Popen we started, SIGKILL it if it is still there after timeout_s seconds."""
    import signal
    import subprocess

    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout_s)


def sim_profile(folder: Path, name: str, flags: str, env: dict[str, str]) -> None:
    """Write profiles/<name>.toml for the bundled simulator: `flags` as TOML lines, `env` as [env]."""
    env_lines = "\n".join(f'{k} = "{v}"' for k, v in env.items())
    (folder / f"{name}.toml").write_text(
        f'name = "{name}"\nmodel_path = "Qwen/Qwen2.5-7B-Instruct"\n'
        f'entrypoint = "simulator.launch_server"\n[flags]\nenable-metrics = true\n{flags}\n[env]\n{env_lines}\n'
    )


@contextlib.contextmanager
def runner_thread(runner, join_s: float = 60.0):  # type: ignore[no-untyped-def]
    """Run a runner.loop.Runner in a daemon thread for the block; stop it and check it ended."""
    import threading

    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    try:
        yield runner
    finally:
        runner.stop()
        thread.join(join_s)
        assert not thread.is_alive(), "the runner did not stop"


def run_page(page: str, timeout_s: float = 60.0, **params: str):  # type: ignore[no-untyped-def]
    """An AppTest of app.py switched to `page` with query params; fails on an exception."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=timeout_s)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def stop_group(proc, wait_s: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    """SIGTERM a process started with start_new_session=True and its group; SIGKILL after wait_s."""
    import signal
    import subprocess

    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def collect_measured(duration_s: int, env: dict[str, str], give_up_s: float):  # type: ignore[no-untyped-def]
    """Run a real `pitwall collect --duration S` and watch it: (exit code, seconds it took, peak
    RSS in bytes, its output). It is killed after `give_up_s` seconds (exit code then None)."""
    import subprocess
    import time

    import psutil

    t0 = time.monotonic()
    proc = subprocess.Popen([PY, "-m", "cli", "collect", "--duration", str(duration_s)],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    ps = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None and time.monotonic() - t0 < give_up_s:
        try:
            peak = max(peak, ps.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        time.sleep(0.2)
    took = time.monotonic() - t0
    if proc.poll() is None:
        proc.kill()
    out = proc.communicate(timeout=30)[0].decode(errors="replace")
    return (proc.returncode if took < give_up_s else None), took, peak, out



def collect_beside_baseline(duration_s: int, env: dict[str, str], baseline_env: dict[str, str],
                            give_up_s: float):  # type: ignore[no-untyped-def]
    """collect_measured for `env` and, started at the same moment on the same host, for
    `baseline_env` (an ordinary configuration: its own data folder and database, no hostile
    server): (measured, baseline), each collect_measured's tuple. What a busy host adds to a run
    (interpreter start-up, the database, the last flush, the exit) it adds to both, so
    `measured took - baseline took` is what the configuration itself cost, on any host."""
    import threading

    baseline: list[tuple[object, ...]] = []
    beside = threading.Thread(target=lambda: baseline.append(collect_measured(duration_s, baseline_env, give_up_s)),
                              daemon=True)
    beside.start()
    try:
        measured = collect_measured(duration_s, env, give_up_s)
    finally:
        beside.join(give_up_s + 60)
    assert baseline, "the baseline collect did not come back"
    return measured, baseline[0]

# `make test` runs the suite on several pytest-xdist workers: each worker takes whole groups of
# tests, one at a time (test_group; tests/conftest.py's scheduler hook). A group is the test's file
# (a module's fixtures, one PostgreSQL cluster, one demo, start once on one worker), except:
# - the real-SGLang tier is two groups, each file after file on one worker: the modules that read
#   the tier's shared server (one start, then the shutdown test last: tests/real_sglang/conftest.py),
#   and the modules that start their own (another radix setting, Pitwall's own launches and
#   relaunch, the real parser's runs);
# - the browser tests are four groups, each file after file on one worker: the image flow, the
#   LLM page flows end to end, the young demo's walk and the GPU wall on the same demo (it waits for
#   the demo to age), and the rest.
# Groups go out longest first (RUN_FIRST, then every other file), so the long ones never start
# last. tests/foundation/test_markers.py checks that every file marked `browser` or `real_sglang`
# falls in a group of that marker. (xdist's own `--dist loadgroup` cannot be used: it renames
# items through `item._nodeid`, which pytest 9 no longer reads.)
#: group -> (the marker its files carry, path forms: a folder "x/", else a path's ending); the
#: first group a path matches is its group
SERIAL_GROUPS: dict[str, tuple[str, tuple[str, ...]]] = {
    "real_sglang-shared": ("real_sglang", tuple(f"tests/real_sglang/test_real_sglang_{m}.py" for m in
                                                ("conformance", "router", "server", "trace", "workloads",
                                                 "zz_shutdown"))),
    "real_sglang": ("real_sglang", ("tests/real_sglang/", "tests/launch/test_real_parser_validation.py")),
    "browser-image": ("browser", ("tests/browser/test_image_browser.py",)),
    "browser-e2e": ("browser", ("tests/browser/test_dashboard_e2e.py",)),
    "browser-walk": ("browser", ("tests/browser/test_fresh_demo_browser.py",)),
    "browser": ("browser", ("tests/browser/", "_browser.py")),
}
#: the groups handed out first, longest first (seconds on a 2-core host under the full run, from
#: --durations: the six serial groups 200-400 s, then the files of 30-130 s, so none starts at the
#: tail), then every other group in collection order
RUN_FIRST = ("real_sglang", "browser", "real_sglang-shared", "browser-image", "browser-walk", "browser-e2e",
             "tests/trace/test_trace_capacity.py", "tests/hostile/test_hostile_tier.py",
             "tests/alerts/test_alert_faults.py", "tests/fleet/test_two_runners.py", "tests/trace/test_trace_replay.py",
             "tests/collectors/test_prometheus_source.py", "tests/probe/test_probe_images.py",
             "tests/runner/test_tune.py", "tests/views/test_prom_series.py")


def test_group(nodeid: str) -> str:
    """The xdist work unit a test belongs to: a SERIAL_GROUPS name, else its file."""
    path = nodeid.split("::", 1)[0]
    for group, (_, forms) in SERIAL_GROUPS.items():
        if any(path.startswith(f) if f.endswith("/") else path.endswith(f) for f in forms):
            return group
    return path


#: the groups handed out last: the real vLLM tier's two real servers (a start each, a relaunch that
#: fails and rolls back) take both cores for minutes, which starves the timing-bound walks above
#: (the young demo's charts, a tune watched from the page, a scrape catching a running request:
#: each failed once beside it); at the tail it costs a few minutes of wall time instead
RUN_LAST = ("tests/real_vllm/test_real_vllm_pitwall.py",)


def run_order(nodeid: str) -> int:
    """Where a test's group goes in the hand-out order: its RUN_FIRST place, else after them,
    and RUN_LAST's after everything."""
    group = test_group(nodeid)
    if group in RUN_LAST:
        return len(RUN_FIRST) + 1
    return RUN_FIRST.index(group) if group in RUN_FIRST else len(RUN_FIRST)


test_group.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test
