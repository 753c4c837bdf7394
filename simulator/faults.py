"""``--sim-fault`` specs and the text real SGLang/PyTorch print when those faults happen.

| spec | effect |
|---|---|
| ``oom-after=N`` | the prefill admitting request N+1 raises ``torch.OutOfMemoryError: CUDA out of memory`` in the scheduler: ``Scheduler hit an exception: Traceback ...``, ``Received sigquit from a child process. It usually means the child failed.``, process killed (SIGKILL, exit -9) |
| ``oom-at-usage=F`` | the first decode step with token usage >= F raises ``Decode out of memory. Try to lower your batch size.`` the same way |
| ``crash-after=N`` | after N finished requests the scheduler raises a CUDA illegal-memory-access error, same crash path |
| ``hang-after=N`` | after N finished requests the scheduler stops stepping; HTTP still accepts, nothing completes, /health times out (503 after SGLANG_HEALTH_CHECK_TIMEOUT); the process stays alive |
| ``crash-at-start`` | the scheduler raises the same CUDA error while loading weights: the server never becomes ready and dies (SIGKILL) |
| ``slow-prefill=S`` (with ``slow-after=N``, ``slow-for=M``) | every prefill batch takes S model seconds longer while N <= finished requests < N+M (default: from the start, for ever): a degraded GPU or a noisy neighbour, seen by clients as a slow TTFT; the server stays healthy, and the slowness clears by itself after M requests |
| ``slow-transfer=S`` (with ``slow-after``, ``slow-for``) | PD prefill server: every KV transfer takes S model seconds longer (simulator/disagg.py): a congested or degraded RDMA link, seen by clients as a slow TTFT and by the prefill's kv_transfer_latency_ms |
| ``transfer-fail-every=N`` | PD prefill server: every Nth KV transfer fails (both sides log it and count it in num_transfer_failed_reqs_total; the client gets SGLang's abort) |
| ``nccl-timeout-after=N`` | after N finished requests the scheduler hangs for NCCL_HANG_MODEL_S, prints PyTorch's NCCL watchdog lines and the process dies |

Slow startup is ``--sim-startup-s``; port already in use is a real bind failure.
"""

from __future__ import annotations

from dataclasses import dataclass

NCCL_HANG_MODEL_S = 10.0
KINDS = ("oom-after", "oom-at-usage", "crash-after", "hang-after", "nccl-timeout-after",
         "slow-prefill", "slow-after", "slow-for", "slow-transfer", "transfer-fail-every")
FLAGS = ("crash-at-start",)


@dataclass(frozen=True)
class Faults:
    oom_after: int | None = None
    oom_at_usage: float | None = None
    crash_after: int | None = None
    hang_after: int | None = None
    nccl_timeout_after: int | None = None
    crash_at_start: bool = False
    slow_prefill_s: float | None = None
    slow_after: int = 0
    slow_for: int | None = None
    slow_transfer_s: float | None = None
    transfer_fail_every: int | None = None

    def _window(self, finished: int) -> bool:
        return finished >= self.slow_after and (self.slow_for is None or finished < self.slow_after + self.slow_for)

    def slow_extra_s(self, finished: int) -> float:
        """Model seconds added to a prefill batch when `finished` requests have completed."""
        return self.slow_prefill_s if self.slow_prefill_s and self._window(finished) else 0.0

    def slow_transfer_extra_s(self, finished: int) -> float:
        """Model seconds added to a PD KV transfer when `finished` requests have completed."""
        return self.slow_transfer_s if self.slow_transfer_s and self._window(finished) else 0.0


def parse_faults(specs: list[str]) -> Faults:
    """``["oom-after=3", "hang-after=10"]`` -> Faults; ValueError names the bad spec."""
    values: dict[str, float] = {}
    flags: set[str] = set()
    for spec in specs:
        kind, sep, raw = spec.partition("=")
        if not sep and kind in FLAGS:
            flags.add(kind)
            continue
        if not sep or kind not in KINDS:
            raise ValueError(f"--sim-fault {spec!r} is not one of "
                             f"{', '.join([k + '=N' for k in KINDS] + list(FLAGS))}")
        try:
            values[kind] = float(raw)
        except ValueError:
            raise ValueError(f"--sim-fault {spec!r} needs a number after '='") from None

    def as_int(key: str) -> int | None:
        return int(values[key]) if key in values else None

    if ("slow-after" in values or "slow-for" in values) and not {"slow-prefill", "slow-transfer"} & set(values):
        raise ValueError("--sim-fault slow-after / slow-for need slow-prefill=SECONDS or slow-transfer=SECONDS too")
    return Faults(as_int("oom-after"), values.get("oom-at-usage"), as_int("crash-after"),
                  as_int("hang-after"), as_int("nccl-timeout-after"),
                  "crash-at-start" in flags, values.get("slow-prefill"),
                  as_int("slow-after") or 0, as_int("slow-for"), values.get("slow-transfer"),
                  as_int("transfer-fail-every"))


def traceback_text(exc_type: str, message: str, frames: list[tuple[str, int, str, str]]) -> str:
    """A Python traceback as ``traceback.format_exc()`` prints it."""
    lines = ["Traceback (most recent call last):"]
    for path, lineno, func, code in frames:
        lines.append(f'  File "{path}", line {lineno}, in {func}')
        lines.append(f"    {code}")
    lines.append(f"{exc_type}: {message}")
    return "\n".join(lines)


SCHED_FRAMES = [
    ("/usr/local/lib/python3.11/dist-packages/sglang/srt/managers/scheduler.py", 3412,
     "run_scheduler_process", "scheduler.event_loop_overlap()"),
    ("/usr/local/lib/python3.11/dist-packages/torch/utils/_contextlib.py", 120,
     "decorate_context", "return func(*args, **kwargs)"),
    ("/usr/local/lib/python3.11/dist-packages/sglang/srt/managers/scheduler.py", 1187,
     "event_loop_overlap", "batch_result = self.run_batch(batch)"),
    ("/usr/local/lib/python3.11/dist-packages/sglang/srt/managers/scheduler.py", 2461,
     "run_batch", "batch_result = self.model_worker.forward_batch_generation(model_worker_batch)"),
]


def nccl_watchdog_lines(*, seq: int, ts: str) -> list[str]:
    """PyTorch ProcessGroupNCCL watchdog output on a collective timeout (ts like ``1202 12:00:00``)."""
    work = (f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=4194304, NumelOut=4194304, "
            f"Timeout(ms)=600000)")
    head = f"[rank0]:[E{ts}.000000000 ProcessGroupNCCL.cpp:"
    return [
        f"{head}632] [Rank 0] Watchdog caught collective operation timeout: {work} ran for "
        f"600077 milliseconds before timing out.",
        f"{head}2268] [PG ID 0 PG GUID 0(default_pg) Rank 0]  failure detected by watchdog at "
        f"work sequence id: {seq} PG status: last enqueued work: {seq}, last completed work: "
        f"{seq - 1}",
        f"{head}684] [Rank 0] To avoid data inconsistency, we are taking the entire process down.",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        f"  what():  [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread "
        f"terminated with exception: [Rank 0] Watchdog caught collective operation timeout: "
        f"{work} ran for 600077 milliseconds before timing out.",
    ]
