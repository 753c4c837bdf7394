"""Guardrails run before a managed server starts: port, GPUs, model path, parallelism fit.

Each check returns Issues (collectors/base.py: Issue): "error" blocks the launch,
"warning"/"note" do not. GPU checks use NVML (nvidia-ml-py); on a host without an NVIDIA driver
they are skipped with a warning, so the demo (the bundled simulator) runs anywhere. Cross-check
by hand: `ss -ltnp | grep :<port>`, `nvidia-smi --query-compute-apps=pid,used_memory --format=csv`.
"""

from __future__ import annotations

import errno
import os
import re
import socket
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from collectors.base import Issue

HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


def check_port(host: str, port: int) -> list[Issue]:
    """The server's port must be free to bind on its host."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        # Same option uvicorn sets, so a port in TIME_WAIT after a stop does not count as busy.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return [Issue("error", "port", f"Port {port} on {host} is already in use by another process; stop it or change the server's base_url.")]
            return [Issue("error", "port", f"Cannot bind {host}:{port} ({exc.strerror}); check the server's base_url.")]
    return []


def check_model_path(model_path: str, engine_name: str = "the server") -> list[Issue]:
    """A local path must exist; an `org/name` Hugging Face id is accepted with a note."""
    looks_local = model_path.startswith(("/", "./", "../", "~")) or os.path.exists(model_path)
    if looks_local:
        path = os.path.expanduser(model_path)
        if not os.path.exists(path):
            return [Issue("error", "model_path", f"Model path {model_path} does not exist on this host; fix model_path or copy the weights there.")]
        return []
    if HF_ID.match(model_path):
        return [Issue("note", "model_path", f"{model_path} is not a local folder; {engine_name} will treat it as a Hugging Face id (downloaded unless cached).")]
    return [Issue("error", "model_path", f"Model path {model_path!r} is neither an existing folder nor a Hugging Face id like Qwen/Qwen2.5-7B-Instruct.")]


def _int_flag(flags: dict[str, Any], *names: str) -> int:
    for n in names:
        v = flags.get(n)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return 1


def check_parallelism(flags: dict[str, Any], gpu_count: int | None) -> list[Issue]:
    """tp x dp must fit the server's GPUs (gpu_indices, else what NVML sees)."""
    tp = _int_flag(flags, "tp-size", "tensor-parallel-size", "tp")
    dp = _int_flag(flags, "dp-size", "data-parallel-size")
    need = max(tp * dp, _int_flag(flags, "num-gpus"))  # num-gpus: the diffusion server's count
    if gpu_count is None:
        if need > 1:
            return [Issue("warning", "tp-size", f"tp x dp = {need} GPUs, but the GPU count is unknown (no gpu_indices, no NVML); not checked.")]
        return []
    if need > gpu_count:
        return [Issue("error", "tp-size", f"tp-size {tp} x dp-size {dp} needs {need} GPUs but the server has {gpu_count}; lower them or add GPUs to gpu_indices.")]
    return []


def process_tree(pid: int | None) -> list[int]:
    """pid and all its descendants (a server's worker children: its scheduler, detokenizer, ...)."""
    if not pid:
        return []
    import psutil

    try:
        return [pid] + [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return [pid]


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used_bytes: int | None


def nvml_snapshot() -> dict[int, list[GpuProcess]] | None:
    """{GPU index: compute processes} from NVML, or None when NVML is unavailable."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None
    try:
        out: dict[int, list[GpuProcess]] = {}
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            try:
                procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
            except Exception:
                procs = []
            out[i] = [GpuProcess(int(p.pid), getattr(p, "usedGpuMemory", None)) for p in procs]
        return out
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def check_gpus(
    gpu_indices: list[int] | None,
    own_pids: Collection[int] = (),
    snapshot: dict[int, list[GpuProcess]] | None = None,
    *,
    probe: bool = True,
) -> tuple[list[Issue], int | None]:
    """(issues, GPU count): requested GPUs exist and no foreign process holds memory on them.

    own_pids: the processes of the server being replaced (a relaunch), which are not foreign.
    """
    snap = snapshot if snapshot is not None or not probe else nvml_snapshot()
    if snap is None:
        count = len(gpu_indices) if gpu_indices else None
        return [Issue("warning", "gpu", "GPU checks skipped: NVML is not available on this host (no NVIDIA driver).")], count
    issues: list[Issue] = []
    wanted = list(gpu_indices) if gpu_indices else sorted(snap)
    for idx in wanted:
        if idx not in snap:
            issues.append(Issue("error", "gpu", f"GPU {idx} is not present (this host has {len(snap)}: {', '.join(map(str, sorted(snap))) or 'none'}); fix gpu_indices."))
            continue
        foreign = [p for p in snap[idx] if p.pid not in own_pids]
        if foreign:
            held = ", ".join(
                f"pid {p.pid}" + (f" ({p.used_bytes / 2**30:.1f} GiB)" if p.used_bytes else "") for p in foreign
            )
            issues.append(Issue("error", "gpu", f"GPU {idx} has memory held by other processes ({held}); stop them or choose other GPUs."))
    return issues, len(wanted)
