"""Radix prefix cache over token ids, with lock counts and LRU eviction of unlocked leaves.

The tree owns KV slots: ``total_size`` tokens, of which ``evictable_size`` are in nodes no running
request holds (lock_ref == 0) and can be evicted, least recently used leaf first. Running requests
lock the node that ends their cached prefix; locking walks to the root, as SGLang's RadixCache does.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable


class Node:
    __slots__ = ("children", "parent", "key", "lock_ref", "last_access")

    def __init__(self, parent: Node | None, key: list[int], now: float) -> None:
        self.children: dict[int, Node] = {}
        self.parent = parent
        self.key = key
        self.lock_ref = 0
        self.last_access = now


def _common(a: list[int], b: list[int], start: int) -> int:
    """Length of the common prefix of ``a`` and ``b[start:]``."""
    n = min(len(a), len(b) - start)
    i = 0
    while i < n and a[i] == b[start + i]:
        i += 1
    return i


def path_of(node: Node) -> list[int]:
    """The token ids from the root to the end of ``node``."""
    parts: list[list[int]] = []
    while node.parent is not None:
        parts.append(node.key)
        node = node.parent
    return [t for key in reversed(parts) for t in key]


class RadixCache:
    def __init__(self) -> None:
        self.root = Node(None, [], 0.0)
        self.root.lock_ref = 1
        self.total_size = 0
        self.evictable_size = 0
        self._tick = itertools.count()
        #: called with each evicted leaf's whole prefix before it goes (HiCache's write_back)
        self.on_evict: Callable[[list[int]], object] | None = None
        self.evicted_total = 0  # tokens evicted since start (sglang:evicted_tokens_total)
        self.evict_passes: list[int] = []  # tokens each pass freed, since the metrics took them

    def reset(self) -> None:
        hook = self.on_evict
        self.__init__()  # type: ignore[misc]
        self.on_evict = hook

    def _split(self, node: Node, at: int) -> Node:
        """Split ``node``'s edge after ``at`` tokens; returns the new upper node."""
        assert node.parent is not None
        upper = Node(node.parent, node.key[:at], node.last_access)
        upper.lock_ref = node.lock_ref
        node.parent.children[upper.key[0]] = upper
        node.key = node.key[at:]
        node.parent = upper
        upper.children[node.key[0]] = node
        return upper

    def match_prefix(self, ids: list[int]) -> tuple[int, Node]:
        """Longest cached prefix of ``ids``: (length, node ending exactly there)."""
        node, pos, now = self.root, 0, float(next(self._tick))
        while pos < len(ids):
            child = node.children.get(ids[pos])
            if child is None:
                break
            n = _common(child.key, ids, pos)
            child.last_access = now
            if n < len(child.key):
                child = self._split(child, n)
                pos += n
                node = child
                break
            pos += n
            node = child
        return pos, node

    def insert(self, ids: list[int]) -> tuple[int, Node]:
        """Insert ``ids``; returns (tokens that were already cached, node ending at len(ids))."""
        matched, node = self.match_prefix(ids)
        if matched < len(ids):
            new = Node(node, ids[matched:], float(next(self._tick)))
            node.children[ids[matched]] = new
            self.total_size += len(new.key)
            self.evictable_size += len(new.key)
            node = new
        return matched, node

    def inc_lock(self, node: Node) -> None:
        while node is not self.root and node is not None:
            if node.lock_ref == 0:
                self.evictable_size -= len(node.key)
            node.lock_ref += 1
            node = node.parent  # type: ignore[assignment]

    def dec_lock(self, node: Node) -> None:
        while node is not self.root and node is not None:
            node.lock_ref -= 1
            if node.lock_ref == 0:
                self.evictable_size += len(node.key)
            node = node.parent  # type: ignore[assignment]

    def evict(self, num_tokens: int) -> int:
        """Evict at least ``num_tokens`` unlocked tokens, LRU leaves first; returns tokens freed."""
        heap: list[tuple[float, int, Node]] = []
        seq = itertools.count()
        stack = [self.root]
        while stack:
            n = stack.pop()
            if not n.children and n.lock_ref == 0 and n is not self.root:
                heap.append((n.last_access, next(seq), n))
            stack.extend(n.children.values())
        heapq.heapify(heap)
        freed = 0
        while heap and freed < num_tokens:
            _, _, leaf = heapq.heappop(heap)
            parent = leaf.parent
            assert parent is not None
            if self.on_evict is not None:
                self.on_evict(path_of(leaf))
            del parent.children[leaf.key[0]]
            freed += len(leaf.key)
            self.total_size -= len(leaf.key)
            self.evictable_size -= len(leaf.key)
            if parent is not self.root and not parent.children and parent.lock_ref == 0:
                heapq.heappush(heap, (parent.last_access, next(seq), parent))
        if freed:
            self.evicted_total += freed
            self.evict_passes.append(freed)
        return freed
