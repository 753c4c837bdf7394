"""Radix prefix cache: matching, node splits, lock accounting and LRU eviction."""

from __future__ import annotations

from simulator.radix import RadixCache


def test_shared_prefix_matches_and_splits() -> None:
    t = RadixCache()
    assert t.insert([1, 2, 3, 4])[0] == 0
    # [1, 2, 9] shares 2 tokens: the edge [1,2,3,4] splits into [1,2] + [3,4].
    n, node = t.match_prefix([1, 2, 9])
    assert n == 2 and node.key == [1, 2]
    assert t.insert([1, 2, 9])[0] == 2
    assert t.total_size == 5  # 4 + the new [9]
    assert t.match_prefix([1, 2, 3, 4, 5])[0] == 4
    assert t.match_prefix([7])[0] == 0


def test_locked_nodes_are_not_evictable() -> None:
    t = RadixCache()
    _, a = t.insert([1, 2, 3])
    t.insert([5, 6])
    assert t.evictable_size == 5
    t.inc_lock(a)
    assert t.evictable_size == 2
    assert t.evict(10) == 2  # only [5, 6] can go
    assert t.total_size == 3 and t.match_prefix([1, 2, 3])[0] == 3
    t.dec_lock(a)
    assert t.evictable_size == 3
    assert t.evict(1) == 3 and t.total_size == 0


def test_eviction_is_least_recently_used_first() -> None:
    t = RadixCache()
    t.insert([1, 1])
    t.insert([2, 2])
    t.insert([3, 3])
    t.match_prefix([1, 1])  # touch [1,1]: now [2,2] is the oldest
    assert t.evict(2) == 2
    assert t.match_prefix([2, 2])[0] == 0
    assert t.match_prefix([1, 1])[0] == 2 and t.match_prefix([3, 3])[0] == 2


def test_evicting_a_leaf_exposes_its_parent() -> None:
    t = RadixCache()
    t.insert([1, 2, 3])
    t.insert([1, 2, 4])  # [1,2] -> {[3], [4]}
    assert t.evict(3) == 4  # both leaves, then the parent [1,2]
    assert t.total_size == 0 and t.evictable_size == 0
