"""Benchmark: relaunch overhead = (relaunch request -> ready) - (the server's own startup time).

Run: ``.venv/bin/python bench/relaunch_overhead.py [--rounds 3] [--speed 50] [--startup-s 2]``

Engine: the bundled simulator (`python -m simulator.launch_server`), configured like any engine
through its profile's [env] (SGLANG_SIM_SPEED, SGLANG_SIM_STARTUP_S). Side by side in one run:

- startup: the engine started directly (Popen of the same argv and env the supervisor uses),
  timed from spawn to the first `/health` 200 (polled every 10 ms) — the server's own cost;
- relaunch: a real Runner (default 0.2 s tick, no collectors) with the supervisor, the server
  running profile A; `launcher.request(relaunch, profile B)` is timed until the Intent is done
  (polled every 10 ms). This includes the intent claim, validation (profile read, flag table,
  the server-python `import sglang` probe, guardrails), SIGTERM + wait of the old process, spawn,
  readiness polling, and storage writes.

overhead = median(relaunch) - median(startup); target <= 1 s. Printed as a table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cli.wiring import runner_parts  # noqa: E402
from collectors.sglang.launch import build_argv  # noqa: E402
from config.settings import Settings  # noqa: E402
from launching import launcher  # noqa: E402
from runner.loop import Runner  # noqa: E402
from storage import repo  # noqa: E402
from storage.db import make_engine  # noqa: E402

PROFILE = """name = "{name}"
model_path = "Qwen/Qwen2.5-7B-Instruct"
entrypoint = "simulator.launch_server"
[flags]
enable-metrics = true
max-running-requests = {mrr}
[env]
SGLANG_SIM_SPEED = "{speed}"
SGLANG_SIM_STARTUP_S = "{startup}"
"""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_health(url: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.01)
    raise SystemExit(f"the engine at {url} was not healthy within {timeout:.0f} s")


def direct_startup(port: int, env: dict[str, str], log: Path) -> float:
    argv = build_argv(sys.executable, "simulator.launch_server", "Qwen/Qwen2.5-7B-Instruct", "127.0.0.1", port,
                      {"enable-metrics": True, "max-running-requests": 8})
    with open(log, "ab") as f:
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env={**os.environ, **env},
                                start_new_session=True)
        try:
            wait_health(f"http://127.0.0.1:{port}")
            return time.monotonic() - t0
        finally:
            proc.terminate()
            proc.wait(30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--speed", type=float, default=50.0)
    ap.add_argument("--startup-s", type=float, default=2.0, help="model seconds of simulated startup")
    args = ap.parse_args()
    env = {"SGLANG_SIM_SPEED": str(args.speed), "SGLANG_SIM_STARTUP_S": str(args.startup_s)}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = root / "profiles"
        folder.mkdir()
        for name, mrr in (("a", 8), ("b", 16)):
            (folder / f"{name}.toml").write_text(PROFILE.format(name=name, mrr=mrr, speed=args.speed, startup=args.startup_s))
        startups = []
        for _ in range(args.rounds):
            startups.append(direct_startup(free_port(), env, root / "direct.log"))

        engine = make_engine(f"sqlite:///{root / 'pitwall.db'}")
        port = free_port()
        settings = Settings(data_dir=root, database_url="", profiles_dir=folder)
        repo.upsert_server(engine, name="bench", base_url=f"http://127.0.0.1:{port}", managed=True,
                           python=sys.executable, profile="a", log_path=str(root / "bench.log"))
        supervisor, handlers = runner_parts(settings, engine)
        runner = Runner(engine, [], supervisor=supervisor, intent_handlers=handlers)
        thread = threading.Thread(target=runner.run, daemon=True)
        thread.start()
        relaunches = []
        try:
            first = None
            deadline = time.monotonic() + 120
            while first is None and time.monotonic() < deadline:
                found = repo.list_intents(engine, kinds=["launch"])
                first = found[0] if found else None
                time.sleep(0.05)
            assert first is not None and first.id is not None
            done = launcher.follow(engine, first.id, timeout_s=120, poll_s=0.01)
            assert done is not None and done.state == "done", done.message if done else "no intent"
            for i in range(args.rounds):
                profile = "b" if i % 2 == 0 else "a"
                t0 = time.monotonic()
                intent = launcher.request(engine, kind="relaunch", server_name="bench", actor="bench", profile=profile)
                assert intent.id is not None
                final = launcher.follow(engine, intent.id, timeout_s=120, poll_s=0.01)
                relaunches.append(time.monotonic() - t0)
                assert final is not None and final.state == "done", final.message if final else "no intent"
        finally:
            runner.stop()
            thread.join(60)
            engine.dispose()
    s_med, r_med = statistics.median(startups), statistics.median(relaunches)
    overhead = r_med - s_med
    print(f"rounds: {args.rounds}   engine: simulator, SGLANG_SIM_SPEED={args.speed:g}, SGLANG_SIM_STARTUP_S={args.startup_s:g}")
    print(f"{'measure':<34}{'median s':>10}{'min s':>8}{'max s':>8}")
    print(f"{'server own startup (spawn->200)':<34}{s_med:>10.3f}{min(startups):>8.3f}{max(startups):>8.3f}")
    print(f"{'relaunch request -> ready':<34}{r_med:>10.3f}{min(relaunches):>8.3f}{max(relaunches):>8.3f}")
    print(f"relaunch overhead: {overhead:.3f} s (target <= 1 s: {'met' if overhead <= 1.0 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
