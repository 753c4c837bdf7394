"""SLO targets: the [slo] table's validation, precedence with UI edits, and grading."""

from __future__ import annotations

import pytest

from scorecard import slo


def test_bare_number_and_table_forms():
    got = slo.resolve(None, {"ttft_p99_s": 0.5, "success_rate": {"target": 0.99, "warn": 0.9}})
    t = got.targets["ttft_p99_s"]
    # lower-is-better default warn bound: 0.5 * (1 + 0.10) = 0.55
    assert (t.target, t.warn, t.origin) == (0.5, pytest.approx(0.55), "pitwall.toml")
    assert got.targets["success_rate"].warn == 0.9


def test_grading_both_directions():
    s = slo.resolve(None, {"ttft_p99_s": 0.5, "rps": 10.0, "warn_margin": 0.2})
    lower, higher = s.targets["ttft_p99_s"], s.targets["rps"]
    # lower: <= 0.5 pass, <= 0.5 * 1.2 = 0.6 warn, above fail
    assert [slo.grade("ttft_p99_s", x, lower) for x in (0.5, 0.59, 0.61)] == [
        "pass", "warn", "fail"]
    # higher: >= 10 pass, >= 10 * 0.8 = 8 warn, below fail
    assert [slo.grade("rps", x, higher) for x in (10.0, 8.5, 7.9)] == ["pass", "warn", "fail"]
    assert slo.grade("rps", None, higher) == "none"
    assert slo.grade("rps", 5.0, None) == "none"


def test_server_targets_override_global_and_ui_overrides_file(engine):
    raw = {"ttft_p99_s": 0.5, "servers": {"a": {"ttft_p99_s": 0.3}}}
    assert slo.resolve("a", raw).targets["ttft_p99_s"].target == 0.3
    assert slo.resolve("b", raw).targets["ttft_p99_s"].target == 0.5
    slo.save_override(engine, server=None, key="ttft_p99_s", target=0.8)
    ov = slo.load_overrides(engine)
    # UI global beats the file's global, but the file's per-server entry is more specific
    assert slo.resolve("b", raw, ov).targets["ttft_p99_s"].target == 0.8
    assert slo.resolve("a", raw, ov).targets["ttft_p99_s"].target == 0.3
    slo.save_override(engine, server="a", key="ttft_p99_s", target=0.2)
    got = slo.resolve("a", raw, slo.load_overrides(engine)).targets["ttft_p99_s"]
    assert (got.target, got.origin) == (0.2, "ui (server)")
    slo.save_override(engine, server="a", key="ttft_p99_s", target=None)  # removes
    assert slo.resolve("a", raw, slo.load_overrides(engine)).targets["ttft_p99_s"].target == 0.3


def test_ui_edit_with_an_actor_is_audited(engine):
    from storage import repo

    slo.save_override(engine, server="a", key="ttft_p99_s", target=0.2, actor="alice")
    slo.save_override(engine, server=None, key="ttft_p99_s", target=None, actor="bob")
    slo.save_override(engine, server=None, key="success_rate", target=0.99)  # no actor: no row
    audits = [(a.actor, a.target, a.detail) for a in repo.list_audit(engine)
              if a.action == "slo_edit"]
    assert sorted(audits, key=lambda a: a[0]) == [
        ("alice", "a", {"metric": "ttft_p99_s", "target": 0.2}),
        ("bob", "global", {"metric": "ttft_p99_s", "target": None}),
    ]

def test_defaults_and_switching_them_off():
    s = slo.resolve(None, {})
    assert s.targets["success_rate"].origin == "default"
    assert s.targets["ttft_p99_s"].target == 1.0
    assert s.queue_threshold == slo.DEFAULT_QUEUE_THRESHOLD
    off = slo.resolve("a", {"crash_count": "off", "servers": {"a": {"ttft_p99_s": "off"}}})
    assert "crash_count" not in off.targets and "ttft_p99_s" not in off.targets
    assert "ttft_p99_s" in slo.resolve("b", {"servers": {"a": {"ttft_p99_s": "off"}}}).targets


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        ({"ttft_p99": 0.5}, "not a known metric"),
        ({"ttft_p99_s": "fast"}, "expected a number"),
        ({"ttft_p99_s": True}, "expected a number"),
        ({"ttft_p99_s": {"goal": 1}}, "expected a number, {target"),
        ({"gpu_usd_per_hour": 3}, "informational"),
        ({"warn_margin": 2}, "fraction"),
        ({"servers": {"a": 3}}, "must be a table"),
    ],
)
def test_bad_slo_entries_say_what_to_fix(raw, match):
    with pytest.raises(slo.SloError, match=match):
        slo.validate_slo(raw)


def test_dimension_grade_is_the_worst():
    dims = {"a": "latency", "b": "latency", "c": "cost"}
    got = slo.dimension_grades({"a": "pass", "b": "warn", "c": "none"}, dims)
    assert got == {"latency": "warn", "throughput": "none", "cost": "none", "stability": "none"}
