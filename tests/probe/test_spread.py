"""The spread of a figure over repeats of a level, and the tie rule (collectors/probe/spread.py)."""

from __future__ import annotations

from collectors.probe.spread import FLOOR_REL, is_tie, slices, spread_of, widen


def test_slices_cut_in_start_order_and_refuse_too_few() -> None:
    # 10 items in 3 slices: bounds round(0), round(3.33)=3, round(6.67)=7, 10 -> 3, 4, 3 items
    assert slices(list(range(10))) == [[0, 1, 2], [3, 4, 5, 6], [7, 8, 9]]
    assert slices(list(range(8))) == []  # 8 < 3 slices x 3 requests: no spread, not a fake one


def test_spread_is_min_and_max_of_the_slices_and_widens_to_the_whole_figure() -> None:
    values = [1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 4.0, 4.0, 4.0]

    def mean(xs: list[float]) -> float:
        return sum(xs) / len(xs)

    s = spread_of(values, mean)
    assert s is not None and (s.lo, s.hi, s.repeats) == (1.0, 4.0, 3)
    w = widen(spread_of(values, mean), 5.0)
    assert w is not None and (w.lo, w.hi) == (1.0, 5.0)
    assert spread_of(values, lambda xs: None) is None  # no slice gave a value


def test_overlapping_spreads_are_a_tie_and_separate_ones_are_not() -> None:
    # 5.96 vs 5.95 req/s with ranges 5.7-6.2 and 5.6-6.1: inside the noise
    assert is_tie(5.95, 5.96, [5.6, 6.1], [5.7, 6.2])
    # 5.0 vs 8.0 with ranges that do not meet: a real difference
    assert not is_tie(5.0, 8.0, [4.8, 5.2], [7.7, 8.3])


def test_without_a_spread_only_the_floor_calls_a_tie() -> None:
    assert is_tie(100.0, 100.0 * (1 + FLOOR_REL / 2), None, None)
    assert not is_tie(100.0, 110.0, None, [105.0, 115.0])
