"""The KV token pool: ``size`` slots shared by the radix tree and requests' private slots.

used = tree.total_size + Σ private; free = size - used; evictable = unlocked tree tokens;
available (what admission may count on) = free + evictable; token usage (the log's ``token
usage``, /metrics ``sglang:token_usage``) = (used - evictable) / size, as SGLang computes it.
With --disable-radix-cache nothing enters the tree and finished requests free their slots.
"""

from __future__ import annotations

from simulator.hicache import Copy, HostTier
from simulator.radix import Node, RadixCache
from simulator.request import SimRequest


class KvPool:
    def __init__(self, size: int, *, radix: bool, host: HostTier | None = None) -> None:
        self.size = size
        self.radix = radix
        self.tree = RadixCache()
        self.private_total = 0
        self.host = host if radix else None  # HiCache's host tier (simulator/hicache.py)
        if self.host is not None and self.host.write_back:
            self.tree.on_evict = self.host.backup

    def used(self) -> int:
        return self.tree.total_size + self.private_total

    def num_used(self) -> int:
        return self.used() - self.tree.evictable_size

    def token_usage(self) -> float:
        return self.num_used() / self.size

    def available(self) -> int:
        return self.size - self.used() + self.tree.evictable_size

    def match(self, ids: list[int]) -> tuple[int, Node]:
        """Cached prefix of ``ids``; the last token is always recomputed (as SGLang does)."""
        if not self.radix:
            return 0, self.tree.root
        return self.tree.match_prefix(ids[:-1])

    def load_back(self, ids: list[int], device: int) -> Copy | None:
        """HiCache: bring back from host what of ``ids`` the device lost past its ``device``
        cached tokens (room made by evicting unlocked device cache); None when there is nothing
        to bring or no room for it."""
        if self.host is None:
            return None
        n = self.host.hit(ids[:-1], device)
        if n <= 0:
            return None
        _, node = self.tree.match_prefix(ids[:device])
        self.tree.inc_lock(node)  # the device's own part of the prefix is not evicted to make room
        try:
            free = self.size - self.used()
            if free < n:
                self.tree.evict(min(n - free, self.tree.evictable_size))
                if self.size - self.used() < n:
                    return None
            self.tree.insert(ids[:device + n])
        finally:
            self.tree.dec_lock(node)
        return self.host.load(n)

    def _write_through(self, ids: list[int]) -> None:
        if self.host is not None and not self.host.write_back:
            self.host.backup(ids)

    def lock_prefix(self, req: SimRequest, node: Node, prefix: int) -> None:
        if self.radix and prefix > 0:
            self.tree.inc_lock(node)
            req.node, req.tree_len = node, prefix
        req.filled = prefix

    def unlock_prefix(self, req: SimRequest) -> None:
        if req.node is not None:
            self.tree.dec_lock(req.node)
        req.node, req.tree_len, req.filled = None, 0, 0

    def alloc(self, req: SimRequest, n: int) -> bool:
        """n private slots for ``req``, evicting LRU cache if needed; False if they do not fit."""
        free = self.size - self.used()
        if free < n:
            # Evict in slices of >= 1/64 of the pool: one tree walk serves many steps.
            self.tree.evict(min(max(n - free, self.size // 64), self.tree.evictable_size))
            if self.size - self.used() < n:
                return False
        req.private += n
        self.private_total += n
        return True

    def cache_filled(self, req: SimRequest) -> None:
        """After a prefill chunk: move the filled prompt into the tree so others can share it."""
        if not self.radix:
            return
        _, node = self.tree.insert(req.target[:req.filled])
        self._write_through(req.target[:req.filled])
        moved = req.filled - req.tree_len
        self.private_total -= moved
        req.private -= moved
        self.tree.inc_lock(node)
        if req.node is not None:
            self.tree.dec_lock(req.node)
        req.node, req.tree_len = node, req.filled

    def release(self, req: SimRequest) -> None:
        """Give the request's slots to the tree (radix) or back to the pool."""
        if self.radix and req.filled > 0:
            seq = req.target[:req.filled] + req.output_ids[len(req.target) - len(req.input_ids):]
            self.tree.insert(seq[:req.tree_len + req.private])
            self._write_through(seq[:req.tree_len + req.private])
        self.private_total -= req.private
        req.private = 0
        self.unlock_prefix(req)
