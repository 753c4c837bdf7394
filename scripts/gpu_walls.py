"""Record NVML (with GPM) on a real GPU under three loads: idle, a copy loop, a matmul loop.

Run on a machine with an NVIDIA GPU, PyTorch and nvidia-ml-py (not part of Pitwall's own
dependencies: Pitwall never imports torch):

    python3 scripts/gpu_walls.py --out DIR [--seconds 12] [--interval 1]
    python3 scripts/gpu_walls.py --load copy|matmul --seconds 40   # the load alone (a live check
                                                                   # of `pitwall gpu-wall`)

It writes DIR/nvml-<gpu>-{idle,copy,matmul}.json in the recording format of
collectors/gpu_record.py (a fresh NVML session per phase, so each recording starts the way a
collector does: the first frame has no GPM interval yet), and prints one line per phase with
what `utilization.gpu` says beside what GPM says. The two loads are the two walls: the copy
loop moves a 4 GiB buffer device-to-device (bound by memory bandwidth), the matmul loop runs
8192^3 bf16 products (bound by tensor-core compute); `utilization.gpu` reads ~100 % for both.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collectors.gpu_nvml import NvmlBackend, read_gpus  # noqa: E402
from collectors.gpu_record import ReplayBackend, record  # noqa: E402


def _load(kind: str, stop: threading.Event) -> None:
    import torch

    dev = torch.device("cuda:0")
    if kind == "copy":
        src = torch.empty(4 << 30, dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
        step = lambda: dst.copy_(src)  # noqa: E731
    else:
        a = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
        b = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
        step = lambda: torch.mm(a, b)  # noqa: E731
    n = 0
    while not stop.is_set():
        step()
        n += 1
        if n % 8 == 0:  # bound the launch queue so stopping is prompt
            torch.cuda.synchronize(dev)
    torch.cuda.synchronize(dev)


def _summary(recording: dict[str, Any]) -> str:
    readings = [read_gpus(ReplayBackend([f["gpus"]]))[0] for f in recording["frames"][2:]]
    util = [r.util_ratio for r in readings if r.util_ratio is not None]
    gpm = [r.gpm for r in readings if r.gpm]

    def mean(key: str) -> str:
        vals = [g[key] for g in gpm if key in g]
        return f"{100 * sum(vals) / len(vals):.0f} %" if vals else "n/a"

    u = f"{100 * sum(util) / len(util):.0f} %" if util else "n/a"
    return (f"utilization.gpu {u}; GPM: DRAM bandwidth {mean('dram_bw_util_ratio')}, "
            f"tensor (any) {mean('tensor_any_ratio')}, SM {mean('sm_util_ratio')}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--load", choices=("copy", "matmul"), help="run this load alone for --seconds")
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--interval", type=float, default=1.0)
    args = ap.parse_args(argv)
    if args.load:
        import time

        stop = threading.Event()
        threading.Timer(args.seconds, stop.set).start()
        t0 = time.monotonic()
        _load(args.load, stop)
        print(f"{args.load} load ran {time.monotonic() - t0:.1f} s", flush=True)
        return 0
    if not args.out:
        ap.error("--out is required unless --load is given")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for phase in ("idle", "copy", "matmul"):
        stop = threading.Event()
        worker = None if phase == "idle" else threading.Thread(target=_load, args=(phase, stop))
        if worker is not None:
            worker.start()
            import time

            time.sleep(3.0)  # allocation and clocks ramp before the recording starts
        backend = NvmlBackend()
        try:
            data = record(backend, seconds=args.seconds, interval_s=args.interval)
        finally:
            backend.close()
            stop.set()
            if worker is not None:
                worker.join()
        name = (data["frames"][0]["gpus"][0]["fields"].get("name") or "gpu").split()[-1].lower()
        path = out / f"nvml-{name}-{phase}.json"
        path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"{phase}: {_summary(data)} -> {path.name}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
