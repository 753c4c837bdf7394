"""Record raw NVML reads to JSON on a real GPU, and replay them through the same conversion.

`python -m collectors.gpu_record record --seconds 60 --interval 1 --out nvml.json` writes:

    {"format": "pitwall-nvml-recording/1", "meta": {driver, nvml, cuda_driver, gpu_count,
     pynvml}, "frames": [{"t": <s since start>, "read_s": <wall s of the read>, "cpu_s": <CPU s>,
     "gpus": [<raw dict of collectors/gpu_nvml.py>, ...]}, ...]}

`ReplayBackend` is a `Backend` that returns those frames in order (the last one repeats), so the
collector, `read_gpus()` and `readings_to_samples()` run unchanged on recorded hardware.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from collectors.gpu_nvml import NvmlBackend, NvmlUnavailable

RECORDING_FORMAT = "pitwall-nvml-recording/1"


class ReplayBackend:
    """Feeds recorded raw frames back, one per `read_raw()` call; the last one repeats."""

    def __init__(
        self, frames: Sequence[list[dict[str, Any]]], meta: dict[str, Any] | None = None
    ) -> None:
        if not frames:
            raise ValueError(
                "A replay needs at least one recorded frame; record one with `record`."
            )
        self._frames = list(frames)
        self._next = 0
        self._meta = dict(meta or {})

    @classmethod
    def from_recording(cls, recording: dict[str, Any]) -> ReplayBackend:
        if recording.get("format") != RECORDING_FORMAT:
            raise ValueError(f"Not a Pitwall NVML recording (format != {RECORDING_FORMAT!r}).")
        return cls([frame["gpus"] for frame in recording["frames"]], recording.get("meta"))

    def meta(self) -> dict[str, Any]:
        """The driver facts recorded with the frames (driver, NVML and CUDA versions)."""
        return dict(self._meta)

    def read_raw(self) -> list[dict[str, Any]]:
        frame = self._frames[min(self._next, len(self._frames) - 1)]
        self._next += 1
        return frame

    def close(self) -> None:
        pass


def load_recording(path: str | Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    return data


def record(
    backend: NvmlBackend,
    *,
    seconds: float,
    interval_s: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Read every GPU each `interval_s` for `seconds`; returns the recording dict (see module doc)."""
    frames: list[dict[str, Any]] = []
    start = clock()
    while True:
        t0, c0 = clock(), time.process_time()
        gpus = backend.read_raw()
        read_s, cpu_s = clock() - t0, time.process_time() - c0
        frames.append(
            {
                "t": round(t0 - start, 3),
                "read_s": round(read_s, 6),
                "cpu_s": round(cpu_s, 6),
                "gpus": gpus,
            }
        )
        if t0 - start >= seconds:
            break
        sleep(max(0.0, interval_s - (clock() - t0)))
    return {"format": RECORDING_FORMAT, "meta": backend.meta(), "frames": frames}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m collectors.gpu_record", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="record raw NVML reads to JSON")
    rec.add_argument("--seconds", type=float, default=60.0)
    rec.add_argument("--interval", type=float, default=1.0)
    rec.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        backend = NvmlBackend()
    except NvmlUnavailable as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        data = record(backend, seconds=args.seconds, interval_s=args.interval)
    finally:
        backend.close()
    Path(args.out).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(
        f"wrote {len(data['frames'])} frames of {data['meta'].get('gpu_count')} GPU(s) to {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
