"""How faithfully does `pitwall probe --trace` keep a trace's schedule?

A lean stamping server (bench/stamp_server.py, its own process) records when each request
arrived (CLOCK_MONOTONIC, the client's clock on the same host). For each rate, a trace of Poisson
arrivals is replayed through collectors.trace.replay (the code path of `pitwall probe --trace`),
and, side by side in the same run, a floor: a loop that only sleeps to the same due times and
records how late it woke (no request, no parsing) — the host's own timer lateness.

    schedule lag        = send - due, per request (p50 / p99), the replay's own figure
    arrival error       = |(server arrival_i - arrival_0) - (due_i - due_0)| (p50 / p99): the trace's
                          offsets against the offsets the server saw
    lag / floor         = replay lag p99 over the floor's p99 (1.0: the client adds nothing)

Targets: lag p99 <= 10 ms (the replay's trust floor) and arrival error p99 <= 10 ms at 50 and
200 requests/s on a 2-core host.

    .venv/bin/python bench/trace_replay.py [--rates 50,200] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collectors.trace.model import TraceRequest  # noqa: E402
from collectors.trace.replay import ReplayOptions, plan, replay  # noqa: E402


def poisson(rate: float, seconds: float, seed: int) -> list[TraceRequest]:
    rng, t, out = random.Random(seed), 0.0, []
    while t < seconds:
        out.append(TraceRequest(seq=len(out), arrival_s=t, input_tokens=16, output_tokens=4))
        t += rng.expovariate(rate)
    return out


async def floor(due: list[float]) -> list[float]:
    t0 = time.perf_counter() + 0.25
    late = []
    for d in due:
        wait = t0 + d - time.perf_counter()
        if wait > 0:
            await asyncio.sleep(wait)
        late.append(max(0.0, time.perf_counter() - (t0 + d)))
    return late


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) * 1000 if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="50,200")
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    server = subprocess.Popen([sys.executable, str(ROOT / "bench" / "stamp_server.py"), "--port", "0", "--delay-ms", "2"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().split()[1])
        url = f"http://127.0.0.1:{port}"
        print(f"{'rate/s':>7} {'requests':>8} {'lag p50':>8} {'lag p99':>8} {'floor p99':>9} {'lag/floor':>9} "
              f"{'arr.err p50':>11} {'arr.err p99':>11}  (ms)")
        for rate in (float(r) for r in args.rates.split(",")):
            trace = poisson(rate, args.seconds, seed=int(rate))
            p = plan(trace, None, ReplayOptions(max_requests=None))
            base_floor = asyncio.run(floor([d.at_s for d in p.items]))
            sent = asyncio.run(replay(url, p, ReplayOptions(timeout_s=30)))
            with urllib.request.urlopen(f"{url}/stamps", timeout=30) as resp:
                stamps = json.loads(resp.read())
            arrivals = {s.record.request_id: stamps[s.record.request_id]["t0"] for s in sent if s.record.request_id in stamps}
            got = [(s.due.at_s, arrivals[s.record.request_id]) for s in sent if s.record.request_id in arrivals]
            d0, a0 = got[0]
            err = [abs((a - a0) - (d - d0)) for d, a in got]
            lags = [s.lag_s for s in sent]
            ok = sum(s.record.ok for s in sent)
            print(f"{rate:7g} {len(sent):8d} {pct(lags, 50):8.2f} {pct(lags, 99):8.2f} {pct(base_floor, 99):9.2f} "
                  f"{pct(lags, 99) / max(pct(base_floor, 99), 1e-3):9.2f} {pct(err, 50):11.2f} {pct(err, 99):11.2f}"
                  + ("" if ok == len(sent) else f"   ({len(sent) - ok} failed)"))
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
