"""A dcgm-exporter look-alike for the simulator's simulated GPUs, fed by its cost model.

Any simulator process (LLM or image) serves, on a port of its own, ``GET /metrics`` in NVIDIA
dcgm-exporter's text format (release 4.5.3-4.8.2, internal/pkg/rendermetrics/render_metrics.go):
per field a ``# HELP``/``# TYPE`` pair from its counters CSVs (etc/default-counters.csv,
etc/dcp-metrics-included.csv), then one series per GPU labelled ``gpu``, ``UUID``,
``pci_bus_id``, ``device`` (``nvidia<gpu>``), ``modelName``, ``Hostname`` and
``DCGM_FI_DRIVER_VERSION``; integer fields print as integers, double fields (power, profiling
ratios) with six decimals, as the exporter's ``toString`` does. (dcgm-exporter's unreleased main
renames ``Hostname`` to ``hostname``; no release has it yet.)

Configured by environment, so a launch profile stays data and nothing in Pitwall knows it is a
simulator:

| variable | meaning |
|---|---|
| SGLANG_SIM_DCGM_PORT | unset: no exporter; ``9400`` (dcgm-exporter's default) an absolute port; ``+100`` the server's ``--port`` plus 100 (the demo profiles: 30200 beside the demo's 30100) |
| SGLANG_SIM_GPU_INDEX | host-wide index of this process's first GPU (default 0); the others follow |
| SGLANG_SIM_DCGM_MIG | unset: whole cards; GPU instance profiles such as ``3g.71gb,2g.35gb``: every simulated card in MIG mode with these instances, GPU_I_ID 1, 2, ... (below) |

MIG mode, as the real exporter writes it (default ``-d f``; dcgm-exporter issues 488, 512): a card
has no series of its own, only one per GPU instance, labelled ``GPU_I_PROFILE`` and ``GPU_I_ID``
after ``modelName``; each instance's series repeat the card's own fields (clocks, temperatures,
power, energy, XID), and DCGM_FI_DEV_GPU_UTIL / _MEM_COPY_UTIL are not written (DCGM has none
for an instance). The server runs on the first instance (its memory, up to the profile's size, and
its activity); the others are idle (0 MiB used, profiling 0).

GPUs: an LLM server simulates dp_size x tp_size GPUs (DP rank d, TP rank t is index
base + d x tp + t, each DP rank's GPUs run its scheduler's forwards); an image server num_gpus.

Fields (units as DCGM's; figures from simulator/gpu_activity.py over the last WINDOW_S model
seconds, so each scrape sees what the scheduler actually ran just before it):

| field | value |
|---|---|
| DCGM_FI_DEV_GPU_UTIL | % of the window with a forward running |
| DCGM_FI_DEV_MEM_COPY_UTIL | DRAM active x 100 |
| DCGM_FI_DEV_FB_USED / _FREE / _RESERVED | MiB: the server's weights + KV pool (LLM) or weights + text encoder + activations (image) / the rest / RESERVED_MIB |
| DCGM_FI_DEV_POWER_USAGE | W, window mean: 12 % of TDP idle, at most the TDP (gpu_activity.py's power demand, capped) |
| DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION | mJ since the process started (counter, monotonic) |
| DCGM_FI_DEV_GPU_TEMP | °C: 30 + 45 x power / TDP |
| DCGM_FI_DEV_SM_CLOCK, DCGM_FI_DEV_MEM_CLOCK | MHz: idle clock rising to boost with activity, held below boost while the power demand passes the TDP (gpu_activity.py); HBM clock fixed |
| DCGM_FI_DEV_XID_ERRORS | 0 (no XID) |
| DCGM_FI_PROF_GR_ENGINE_ACTIVE, _SM_ACTIVE, _SM_OCCUPANCY, _PIPE_TENSOR_ACTIVE, _DRAM_ACTIVE | 0-1, gpu_activity.py |
| DCGM_FI_PROF_PCIE_TX_BYTES, _RX_BYTES | B/s: token ids in and out (LLM), the image out (image) |

Card table (TDP and clocks of the SXM parts; B200/B300 clocks approximate): a100 400 W,
1410/1593 MHz; h100 700 W, 1980/2619; h200 700 W, 1980/3201; b200 1000 W, 1965/3996; b300
1100 W, 2032/3996; idle SM clock 345 MHz.
Cross-check: ``curl -s http://127.0.0.1:30200/metrics | grep -E 'DRAM_ACTIVE|TENSOR_ACTIVE'``
while a load runs: decode-heavy load reads DRAM high, long prompts tensor high.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from simulator.gpu_activity import Activity

WINDOW_S = 2.0  # model seconds each scrape averages over (Pitwall's GPU poll interval)
RESERVED_MIB = 512  # driver-reserved framebuffer (NVML v2's memory.reserved on a Hopper card)
DRIVER_VERSION = "580.95.05"
IDLE_SM_MHZ = 345
MIB = 1024 * 1024

#: sim GPU key -> (TDP W, boost SM clock MHz, memory clock MHz)
CARDS: dict[str, tuple[float, int, int]] = {
    "a100": (400.0, 1410, 1593),
    "h100": (700.0, 1980, 2619),
    "h200": (700.0, 1980, 3201),
    "b200": (1000.0, 1965, 3996),
    "b300": (1100.0, 2032, 3996),
}

#: field -> (Prometheus type, HELP text of dcgm-exporter's CSV, integer field)
FIELDS: dict[str, tuple[str, str, bool]] = {
    "DCGM_FI_DEV_SM_CLOCK": ("gauge", "SM clock frequency (in MHz).", True),
    "DCGM_FI_DEV_MEM_CLOCK": ("gauge", "Memory clock frequency (in MHz).", True),
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C).", True),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W).", False),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("counter", "Total energy consumption since boot (in mJ).", True),
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %).", True),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("gauge", "Memory utilization (in %).", True),
    "DCGM_FI_DEV_XID_ERRORS": ("gauge", "Value of the last XID error encountered.", True),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "Framebuffer memory free (in MiB).", True),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB).", True),
    "DCGM_FI_DEV_FB_RESERVED": ("gauge", "Framebuffer memory reserved (in MiB).", True),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gauge", "Ratio of time the graphics engine is active.", False),
    "DCGM_FI_PROF_SM_ACTIVE": ("gauge", "The ratio of cycles an SM has at least 1 warp assigned.", False),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("gauge", "The ratio of number of warps resident on an SM.", False),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("gauge", "Ratio of cycles the tensor (HMMA) pipe is active.", False),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("gauge", "Ratio of cycles the device memory interface is active sending or receiving data.", False),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("gauge", "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.", True),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("gauge", "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.", True),
}


@dataclass
class GpuGroup:
    """GPUs that run the same forwards (one scheduler's TP ranks, or an image server's GPUs)."""

    activity: Activity
    count: int
    mem_used_bytes: Callable[[], float]


def card_values(group: GpuGroup, sim_gpu: str) -> dict[str, float]:
    """One GPU's field values now (pure but for the activity's clock)."""
    tdp, boost, mem_mhz = CARDS[sim_gpu]
    w = group.activity.window(WINDOW_S)
    total_mib = group.activity.gpu.memory_bytes / MIB
    used = min(group.mem_used_bytes() / MIB, total_mib - RESERVED_MIB)
    return {
        # rising to boost with activity, held below it while the power cap holds (gpu_activity)
        "DCGM_FI_DEV_SM_CLOCK": round((IDLE_SM_MHZ + (boost - IDLE_SM_MHZ) * min(1.0, 4 * w.busy)) * w.clock_ratio),
        "DCGM_FI_DEV_MEM_CLOCK": mem_mhz,
        "DCGM_FI_DEV_GPU_TEMP": round(30 + 45 * w.power_w / tdp),
        "DCGM_FI_DEV_POWER_USAGE": w.power_w,
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": round(group.activity.energy_j() * 1000),
        "DCGM_FI_DEV_GPU_UTIL": round(100 * w.busy),
        "DCGM_FI_DEV_MEM_COPY_UTIL": round(100 * w.dram),
        "DCGM_FI_DEV_XID_ERRORS": 0,
        "DCGM_FI_DEV_FB_FREE": round(total_mib - RESERVED_MIB - used),
        "DCGM_FI_DEV_FB_USED": round(used),
        "DCGM_FI_DEV_FB_RESERVED": RESERVED_MIB,
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": w.busy,
        "DCGM_FI_PROF_SM_ACTIVE": w.sm_active,
        "DCGM_FI_PROF_SM_OCCUPANCY": w.sm_occupancy,
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": w.tensor,
        "DCGM_FI_PROF_DRAM_ACTIVE": w.dram,
        "DCGM_FI_PROF_PCIE_TX_BYTES": round(w.pcie_tx_bytes_s),
        "DCGM_FI_PROF_PCIE_RX_BYTES": round(w.pcie_rx_bytes_s),
    }


#: fields DCGM reports per GPU instance in MIG mode (the rest are the card's, repeated)
INSTANCE_FIELDS = frozenset(f for f in FIELDS if f.startswith(("DCGM_FI_DEV_FB_", "DCGM_FI_PROF_")))


def instance_values(card: dict[str, float], profile: str, busy: bool) -> dict[str, float]:
    """One MIG instance's series: the card's own fields, and its memory and activity (or idle)."""
    size = int(profile.split(".")[1][:-2]) * 1024  # "3g.71gb" -> 71 GiB, in MiB
    out = {f: v for f, v in card.items() if f not in INSTANCE_FIELDS and "_UTIL" not in f}
    used = min(card["DCGM_FI_DEV_FB_USED"], size) if busy else 0
    out.update({f: (v if busy else 0) for f, v in card.items() if f.startswith("DCGM_FI_PROF_")})
    out.update({"DCGM_FI_DEV_FB_USED": used, "DCGM_FI_DEV_FB_FREE": size - used})
    return out


def mig_profiles(env: dict[str, str] | None = None) -> list[str]:
    """SGLANG_SIM_DCGM_MIG as a list of GPU instance profiles; [] when unset.

    Raises ValueError naming the expected form when a profile is not like ``3g.71gb``."""
    raw = (env if env is not None else os.environ).get("SGLANG_SIM_DCGM_MIG", "").strip()
    profiles = [p.strip() for p in raw.split(",") if p.strip()]
    if any(re.fullmatch(r"[1-7]g\.[1-9][0-9]*gb", p) is None for p in profiles):
        raise ValueError(f"SGLANG_SIM_DCGM_MIG={raw!r}: expected GPU instance profiles such as "
                         "3g.71gb,2g.35gb (one per MIG instance), or unset for whole cards.")
    return profiles


def gpu_uuid(seed: int, index: int) -> str:
    """A stable UUID per simulated card, in NVML's ``GPU-xxxxxxxx-...`` form."""
    return "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_OID, f"pitwall-sim-gpu/{seed}/{index}"))


def render(groups: list[GpuGroup], sim_gpu: str, model_name: str, base_index: int, seed: int,
           hostname: str, mig: list[str] | None = None) -> str:
    """The exporter's whole /metrics text for these GPUs (`mig`: their GPU instance profiles)."""
    rows: list[tuple[int, str, dict[str, float]]] = []  # (card, MIG labels, values)
    index = base_index
    for group in groups:
        values = card_values(group, sim_gpu)  # one window read per group: its GPUs agree
        for _ in range(group.count):
            rows += [(index, f',GPU_I_PROFILE="{p}",GPU_I_ID="{gi}"', instance_values(values, p, gi == 1))
                     for gi, p in enumerate(mig or [], start=1)] or [(index, "", values)]
            index += 1
    out: list[str] = []
    for field, (kind, text, is_int) in FIELDS.items():
        out += [f"# HELP {field} {text}", f"# TYPE {field} {kind}"]
        for i, mig_labels, values in rows:
            if field not in values:
                continue
            labels = (f'gpu="{i}",UUID="{gpu_uuid(seed, i)}",pci_bus_id="00000000:{0x18 + i:02X}:'
                      f'00.0",device="nvidia{i}",modelName="{model_name}"{mig_labels},'
                      f'Hostname="{hostname}",DCGM_FI_DRIVER_VERSION="{DRIVER_VERSION}"')
            v = values[field]
            out.append(f"{field}{{{labels}}} {int(v) if is_int else f'{v:f}'}")
    return "\n".join(out) + "\n"


def exporter_port(server_port: int, env: dict[str, str] | None = None) -> int | None:
    """SGLANG_SIM_DCGM_PORT resolved against the server's port; None when unset.

    Raises ValueError with the variable's expected forms when it is neither."""
    raw = (env if env is not None else os.environ).get("SGLANG_SIM_DCGM_PORT", "").strip()
    if not raw:
        return None
    try:
        port = server_port + int(raw[1:]) if raw.startswith("+") else int(raw)
    except ValueError:
        port = -1
    if not 0 < port < 65536:
        raise ValueError(f"SGLANG_SIM_DCGM_PORT={raw!r}: expected a port such as 9400, or +N for "
                         f"the server's port plus N (e.g. +100).")
    return port


def gpu_index_base(env: dict[str, str] | None = None) -> int:
    raw = (env if env is not None else os.environ).get("SGLANG_SIM_GPU_INDEX", "0").strip() or "0"
    if not raw.isdigit():
        raise ValueError(f"SGLANG_SIM_GPU_INDEX={raw!r}: expected the host-wide index of this "
                         "server's first GPU, a whole number >= 0.")
    return int(raw)


async def start(host: str, port: int, groups: list[GpuGroup], *, sim_gpu: str,
                seed: int) -> web.AppRunner | None:
    """Serve /metrics on host:port; one stderr line (and no exporter) when that cannot bind."""
    base, mig = gpu_index_base(), mig_profiles()
    name = groups[0].activity.gpu.name
    hostname = socket.gethostname()

    async def metrics(request: web.Request) -> web.StreamResponse:
        body = render(groups, sim_gpu, name, base, seed, hostname, mig)
        return web.Response(text=body, content_type="text/plain", charset="utf-8")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, reuse_address=True).start()
    except OSError as exc:
        # stderr, not the SGLang log format: a real server's log has no exporter lines
        sys.stderr.write(f"dcgm-exporter look-alike not started: cannot bind {host}:{port} "
                         f"({exc.strerror}); free the port or change SGLANG_SIM_DCGM_PORT.\n")
        sys.stderr.flush()
        await runner.cleanup()
        return None
    return runner
