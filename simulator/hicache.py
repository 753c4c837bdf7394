"""HiCache's host tier (--enable-hierarchical-cache): a second radix tree in host memory.

SGLang 0.5.23's HiRadixCache keeps a copy of device-cached prefixes in a host pool of
``--hicache-size`` GB, else ``--hicache-ratio`` (2.0) x the device pool, in tokens:
- ``write_through`` (the default): a prefix is copied to host as soon as it enters the device
  tree; ``write_back``: when the device evicts it. Each copy is a backup
  (``hicache_backup_tokens_total{pool="kv"}``, ``_bytes_total``, ``hicache_backup_duration_seconds``).
- A request whose prefix the device lost but the host still holds loads it back over PCIe
  (``load_back_tokens_total{pool="kv"}``, ``load_back_bytes_total``,
  ``load_back_duration_seconds``) instead of recomputing it; its cached tokens count as
  ``cache_source="host"``, the rest of its hit as ``"device"``.
- A full host pool evicts its least recently used prefixes (a write_back eviction that finds no
  room drops the tokens: ``hicache_dropped_tokens_total{reason="host_pressure",pool="kv"}``).
Copy times are bytes / PCIE_BW (model seconds), the KV bytes of the launch's model per token.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from simulator.radix import RadixCache

PCIE_BW = 25e9  # bytes/s host<->device: assumed, not measured (PCIe Gen5 x16's peak is ~64 GB/s a way)
DEFAULT_RATIO = 2.0


@dataclass
class Copy:
    """One transfer between the tiers: tokens, bytes and model seconds."""

    tokens: int
    nbytes: float
    seconds: float


@dataclass
class HostTier:
    capacity: int  # tokens
    kv_bytes_per_token: float
    write_back: bool = False
    tree: RadixCache = field(default_factory=RadixCache)
    backups: list[Copy] = field(default_factory=list)  # since the metrics last took them
    loads: list[Copy] = field(default_factory=list)
    dropped: int = 0

    def used(self) -> int:
        return self.tree.total_size

    def _copy(self, tokens: int) -> Copy:
        nbytes = tokens * self.kv_bytes_per_token
        return Copy(tokens, nbytes, nbytes / PCIE_BW)

    def backup(self, ids: list[int]) -> int:
        """Copy the prefix ``ids`` to host (what it lacks of it); returns tokens copied."""
        if not ids:
            return 0
        matched, _ = self.tree.match_prefix(ids)
        new = len(ids) - matched
        if new <= 0:
            return 0
        over = self.tree.total_size + new - self.capacity
        if over > 0:
            self.tree.evict(min(over, self.tree.evictable_size))
            matched, _ = self.tree.match_prefix(ids)  # the eviction may have taken part of the prefix
            new = len(ids) - matched
            if self.tree.total_size + new > self.capacity:
                self.dropped += new
                return 0
        self.tree.insert(ids)
        self.backups.append(self._copy(new))
        return new

    def hit(self, ids: list[int], device: int) -> int:
        """Tokens of ``ids`` past the device's ``device`` cached ones that host memory holds."""
        held, _ = self.tree.match_prefix(ids)
        return max(0, held - device)

    def load(self, tokens: int) -> Copy:
        c = self._copy(tokens)
        self.loads.append(c)
        return c

    def take(self) -> tuple[list[Copy], list[Copy], int]:
        """(backups, loads, dropped tokens) since the last call."""
        out = (self.backups, self.loads, self.dropped)
        self.backups, self.loads, self.dropped = [], [], 0
        return out


def host_tier(srv: Any) -> HostTier | None:
    """HiCache's host pool of one scheduler of the LLM server `srv`: --hicache-size GB, else
    --hicache-ratio x the device pool, in tokens of this model's KV."""
    ns = srv.ns
    if not ns.enable_hierarchical_cache or ns.disable_radix_cache:
        return None
    per_token = srv.cost.kv_bytes_per_token / srv.cost.tp
    if ns.hicache_size:
        capacity = int(ns.hicache_size * 1e9 / per_token)
    else:
        capacity = int((ns.hicache_ratio or DEFAULT_RATIO) * srv.pool_tokens)
    return HostTier(capacity, per_token, write_back=ns.hicache_write_policy == "write_back")
