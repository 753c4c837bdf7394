"""GPU entries: which GPUs a server's `gpu.*` series name, a card and each of its MIG instances.

The GPU collector (collectors/gpu.py, key table) writes a card under `gpu.<i>.` and each GPU
instance of a card in MIG mode under `gpu.<i>.mig<GPU_I_ID>.`. This module is the one reader of
that key form for the dashboard: the Server page's GPU panels, the Overview's GPU rows, the GPU
wall and preflight list GPU *entries* (a card, then its instances by GPU_I_ID), while everything
that counts cards (GPU count, GPU-hours, energy) counts `<i>` once.

What stays on the card and what is per instance (DCGM's MIG mode): power, energy, temperature,
clocks and the power limit are the card's (`CARD_FIELDS`); memory and the `gpm.*` profiling
figures are the instance's. An instance's label names its profile from the collector's saved
`gpu:info` state (`mig_profile`, dcgm-exporter's GPU_I_PROFILE): "GPU 0 · MIG 3g.71gb
(instance 1)". Cross-check an instance: `nvidia-smi mig -lgi` lists GPU_I_ID and profile.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine

from collectors.gpu_dcgm import STARTUP_GRACE_S
from storage import repo
from storage import series_keys as sk

#: `gpu.<card>.` or `gpu.<card>.mig<GPU_I_ID>.` then the field (`mem_used_bytes`, `gpm.sm_util_ratio`)
KEY_RE = re.compile(r"^gpu\.(\d+)\.(?:mig(\d+)\.)?(.+)$")
#: fields a card keeps for itself when it is in MIG mode (never summed over its instances)
CARD_FIELDS = frozenset({"power_w", "power_limit_w", "energy_j", "temp_c", "sm_clock_hz",
                         "mem_clock_hz", "clock_event_reasons", "throttle_power", "throttle_thermal"})


@dataclass(frozen=True, order=True)
class GpuEntry:
    """A card (`mig_id` None) or one MIG GPU instance of card `index`; `profile` e.g. "3g.71gb"."""

    index: int
    mig_id: int | None = None
    profile: str | None = None

    @property
    def prefix(self) -> str:
        """The key prefix of its series: `gpu.0.` or `gpu.0.mig3.`."""
        return sk.gpu_prefix(self.index, self.mig_id)

    @property
    def label(self) -> str:
        """"GPU 0", or "GPU 0 · MIG 3g.71gb (instance 1)" ("GPU 0 · MIG instance 1" without a profile)."""
        if self.mig_id is None:
            return f"GPU {self.index}"
        if self.profile:
            return f"GPU {self.index} · MIG {self.profile} (instance {self.mig_id})"
        return f"GPU {self.index} · MIG instance {self.mig_id}"

    def key(self, field: str) -> str:
        return self.prefix + field

    def sort_key(self) -> tuple[int, int]:
        """A card first, then its instances by GPU_I_ID."""
        return self.index, -1 if self.mig_id is None else self.mig_id


def parse_key(name: str) -> tuple[int, int | None, str] | None:
    """`gpu.0.mig3.mem_used_bytes` -> (0, 3, "mem_used_bytes"); `gpu.1.power_w` -> (1, None,
    "power_w"); anything else -> None. Pure."""
    m = KEY_RE.match(name)
    if m is None:
        return None
    return int(m.group(1)), None if m.group(2) is None else int(m.group(2)), m.group(3)


def mig_profiles(info: dict[str, Any] | None) -> dict[tuple[int, int], str]:
    """{(card, GPU_I_ID): profile} from the GPU collector's `gpu:info` state. Pure."""
    out: dict[tuple[int, int], str] = {}
    for g in (info or {}).get("gpus") or []:
        if not isinstance(g, dict):
            continue
        index, mig, profile = g.get("index"), g.get("mig_id"), g.get("mig_profile")
        if isinstance(index, int) and isinstance(mig, int) and isinstance(profile, str) and profile:
            out[(index, mig)] = profile
    return out


def entries_from(names: Iterable[str], info: dict[str, Any] | None = None,
                 configured: Iterable[int] | None = None) -> list[GpuEntry]:
    """The GPU entries the metric `names` hold (only cards in `configured` when given; a listed
    card with no series yet still has its entry), a card first, then its instances. Pure."""
    wanted = set(configured or [])
    profiles = mig_profiles(info)
    found: set[tuple[int, int | None]] = {(i, None) for i in wanted}
    for name in names:
        parsed = parse_key(name)
        if parsed is not None and (not wanted or parsed[0] in wanted):
            found.add((parsed[0], None))  # a MIG card keeps its card entry (power, temperature)
            found.add((parsed[0], parsed[1]))
    entries = [GpuEntry(i, mig, profiles.get((i, mig)) if mig is not None else None) for i, mig in found]
    return sorted(entries, key=GpuEntry.sort_key)


def load_info(engine: Engine, server_id: int | None = None) -> dict[str, Any]:
    """The GPU collector's saved `gpu:<server_id>:info` (else the host's `gpu:info`), or {}."""
    keys = ([f"gpu:{server_id}:info"] if server_id is not None else []) + ["gpu:info"]
    for key in keys:
        info = repo.load_state(engine, key=key)
        if info:
            return info
    return {}


def gpu_entries(engine: Engine, *, server_id: int, configured: Iterable[int] | None = None) -> list[GpuEntry]:
    """Every GPU entry with a stored `gpu.*` series of the server (module doc), labelled with
    its MIG profile; `configured` (the server's gpu_indices) keeps only those cards."""
    names = repo.metric_names(engine, server_id=server_id, prefix="gpu.")
    return entries_from(names, load_info(engine, server_id), configured)


def has_instances(entries: Iterable[GpuEntry], index: int) -> bool:
    """True when card `index` shows MIG instances among `entries` (it is in MIG mode)."""
    return any(e.index == index and e.mig_id is not None for e in entries)


def absent_text(started_at: float | None, now: float, *, in_window: bool = False) -> str:
    """Why a server shows no GPU figures, in words: a server that started less than twice the
    exporter's start-up grace ago (collectors/gpu_dcgm.STARTUP_GRACE_S) is waiting for its GPU
    exporter, which is not an error; otherwise there is no telemetry to read."""
    if started_at is not None and 0 <= now - started_at < 2 * STARTUP_GRACE_S:
        return (f"Waiting for the GPU exporter: the server started {now - started_at:.0f} s ago; "
                "its GPU figures appear once the exporter answers (within a minute).")
    where = " in this window" if in_window else " on this host"
    return (f"No GPU telemetry{where} (no NVML, no dcgm-exporter answering gpu.dcgm_url, "
            "or no GPUs assigned).")
