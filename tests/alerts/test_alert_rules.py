"""Alert rules on recorded data: every burn-rate and threshold rule fires on a fault and stays
quiet on noise at its target; rule parsing errors say what is wrong; the lifecycle's `for`,
resolve and reminders."""

from __future__ import annotations

import random

import pytest

from runner.alerts import evaluate as ev
from runner.alerts.lifecycle import advance
from runner.alerts.rules import BURN_SPEEDS, AlertRuleError, Rule, build_rules, parse_rule
from storage.models import AlertState

NOW = 1_700_000_000.0


def _canary(rng: random.Random, *, span_s: float, every_s: float, bad_p: float, slo: str, target: float,
            fault_from_s: float | None = None) -> list[tuple[float, bool, float | None, float | None]]:
    """Recorded canary rows (ts, ok, ttft_s, e2e_s) ending at NOW: `bad_p` of them bad at random
    (noise), every one bad in the last `fault_from_s` seconds (the fault)."""
    rows = []
    t = NOW - span_s
    while t <= NOW:
        bad = rng.random() < bad_p or (fault_from_s is not None and t >= NOW - fault_from_s)
        if slo == "success_rate":
            rows.append((t, not bad, 0.1, 0.2))
        else:
            figure = target * (3.0 if bad else rng.uniform(0.2, 0.99))
            rows.append((t, True, figure, figure))
        t += every_s
    return rows


@pytest.mark.parametrize("slo,target", [("success_rate", 0.99), ("ttft_p99_s", 1.0), ("image_p99_s", 30.0)])
@pytest.mark.parametrize("speed", list(BURN_SPEEDS))
def test_burn_rate_fires_on_a_fault_and_not_on_noise_at_the_target(slo: str, target: float, speed: str) -> None:
    short_s, long_s, factor = BURN_SPEEDS[speed]
    budget = ev.error_budget(slo, target)

    def verdict(rows):
        return ev.multiwindow(ev.outcomes_for(slo, target, rows), now=NOW, short_s=short_s, long_s=long_s,
                              factor=factor, budget=budget, what=slo)

    # noise exactly at the target: 1 % bad (the whole budget, burn ~1x) for six hours, canary every 10 s
    noise = _canary(random.Random(7), span_s=long_s, every_s=10.0, bad_p=0.01, slo=slo, target=target)
    quiet = verdict(noise)
    assert not quiet.active and quiet.value is not None and quiet.value < factor
    # a fault: every request bad for the last 20 % of the long window (> factor x budget in both)
    fault = _canary(random.Random(7), span_s=long_s, every_s=10.0, bad_p=0.01, slo=slo, target=target,
                    fault_from_s=long_s * 0.2)
    loud = verdict(fault)
    assert loud.active, loud.summary
    # 1 h window, fast: 20 % bad / 1 % budget = 20x > 14.4; slow 6 h: 20x > 6
    assert loud.value is not None and loud.value > factor


def test_burn_rate_needs_both_windows() -> None:
    """A short burst (one bad minute) trips the 5-min window but not the 1-h one: no alert."""
    rows = [(NOW - s, s > 60, 0.1, 0.1) for s in range(0, 3600, 10)]  # bad only in the last minute
    outcomes = ev.outcomes_for("success_rate", 0.99, rows)
    v = ev.multiwindow(outcomes, now=NOW, short_s=300, long_s=3600, factor=14.4, budget=0.01, what="sr")
    short = ev.burn_rate(outcomes, now=NOW, window_s=300, budget=0.01)
    assert short is not None and short > 14.4  # 7 of 31 bad = 22.6x
    assert not v.active


@pytest.mark.parametrize("rule", [r for r in build_rules([]) if r.kind == "threshold"] + [
    Rule("queue", "threshold", metric="queue_max", op=">", value=64.0, window_s=60.0, for_s=120.0),
    Rule("hit", "threshold", metric="radix_hit_rate", op="<", value=0.2, window_s=60.0, for_s=120.0),
    Rule("temp", "threshold", metric="gpu.<gpu>.temp_c", op=">=", value=85.0, agg="avg", window_s=60.0, for_s=120.0),
], ids=lambda r: r.name)
def test_threshold_fires_after_for_and_not_on_noise(rule: Rule) -> None:
    _, agg = rule.series()
    above = rule.op.startswith(">")
    rng = random.Random(3)

    def run(values_at: callable) -> list[str]:  # type: ignore[valid-type]
        """Evaluate every 15 s for 10 min; the states the alert went through."""
        alert, states = None, []
        for i in range(41):
            now = NOW + 15 * i
            values = [values_at(now - j) for j in range(0, int(rule.window_s), 5)][::-1]
            v = ev.threshold(values, agg=agg, op=rule.op, value=rule.value, what=rule.metric)
            step = advance(alert, v, fresh=AlertState(rule=rule.name, fingerprint="f"), now=now, for_s=rule.for_s,
                           repeat_s=3600.0, silenced=False)
            alert = None if step.drop is not None else step.save or alert
            if alert is not None and alert.state == "resolved":
                alert = None
            states.append(alert.state if alert else "inactive")
        return states

    scale = abs(rule.value) or 1.0
    # noise at the target: every sample within 2 % of it, on both sides for an average (which
    # then sits at the target), up to it for a max / min (a queue that reaches its limit)
    side = (-1 if above else 1) if agg in ("max", "min") else None
    noisy = run(lambda t: rule.value + scale * 0.02 * (side or (1 if rng.random() < 0.5 else -1)) * rng.random())
    assert "firing" not in noisy
    # a fault: 30 % past the target from the start; fires once `for` has passed
    past = rule.value * (1.3 if above else 0.7) + (0 if rule.value else (1 if above else -1))
    faulty = run(lambda t: past)
    first = faulty.index("firing")
    assert faulty[:first] and set(faulty[:first]) == {"pending"}
    assert 15 * first >= rule.for_s and 15 * (first - 1) < rule.for_s  # within `for` plus one evaluation


def test_lifecycle_resolve_and_reminders() -> None:
    yes, no = ev.Verdict(True, 1.0, "on"), ev.Verdict(False, 0.0, "off")

    def fresh() -> AlertState:
        return AlertState(rule="r", fingerprint="r:1")

    s1 = advance(None, yes, fresh=fresh(), now=NOW, for_s=0, repeat_s=100, silenced=False)
    assert s1.save is not None and s1.save.state == "firing" and s1.notify == "firing"
    s2 = advance(s1.save, yes, fresh=fresh(), now=NOW + 50, for_s=0, repeat_s=100, silenced=False)
    assert s2.notify is None  # one notification per alert
    s3 = advance(s2.save, yes, fresh=fresh(), now=NOW + 100, for_s=0, repeat_s=100, silenced=False)
    assert s3.notify == "firing"  # the reminder
    s4 = advance(s3.save, no, fresh=fresh(), now=NOW + 110, for_s=0, repeat_s=100, silenced=False)
    assert s4.save is not None and s4.save.state == "resolved" and s4.notify == "resolved"
    # silenced from the start: fires quietly, and its resolution sends nothing either
    q = advance(None, yes, fresh=fresh(), now=NOW, for_s=0, repeat_s=100, silenced=True)
    assert q.save is not None and q.save.state == "firing" and q.notify is None
    assert advance(q.save, no, fresh=fresh(), now=NOW + 5, for_s=0, repeat_s=100, silenced=True).notify is None


def test_no_sample_in_the_window_keeps_the_alert_as_it_is() -> None:
    """A gap in the samples (a canary slowed by the incident it reports) neither resolves a firing
    alert nor drops a pending one, nor starts one; the next sample decides."""
    yes, no = ev.Verdict(True, 1.0, "on"), ev.Verdict(False, 0.0, "off")
    gap = ev.threshold([], agg="last", op=">", value=0.3, what="canary.ttft_s")
    assert gap.known is False and gap.active is False and "no sample" in gap.summary

    def fresh() -> AlertState:
        return AlertState(rule="r", fingerprint="r:1")

    assert advance(None, gap, fresh=fresh(), now=NOW, for_s=0, repeat_s=100, silenced=False).save is None
    firing = advance(None, yes, fresh=fresh(), now=NOW, for_s=0, repeat_s=100, silenced=False).save
    assert firing is not None and firing.state == "firing"
    kept = advance(firing, gap, fresh=fresh(), now=NOW + 1, for_s=0, repeat_s=100, silenced=False)
    assert kept.save is not None and kept.save.state == "firing" and kept.notify is None
    reminder = advance(kept.save, gap, fresh=fresh(), now=NOW + 100, for_s=0, repeat_s=100, silenced=False)
    assert reminder.notify == "firing"
    done = advance(reminder.save, no, fresh=fresh(), now=NOW + 101, for_s=0, repeat_s=100, silenced=False)
    assert done.save is not None and done.save.state == "resolved" and done.notify == "resolved"
    # pending: kept through the gap (not dropped, not promoted by it)
    pending = advance(None, yes, fresh=fresh(), now=NOW, for_s=10, repeat_s=100, silenced=False).save
    assert pending is not None and pending.state == "pending"
    held = advance(pending, gap, fresh=fresh(), now=NOW + 20, for_s=10, repeat_s=100, silenced=False)
    assert held.save is not None and held.save.state == "pending" and held.drop is None


@pytest.mark.parametrize("raw,needle", [
    ({"name": "x"}, "kind is missing"),
    ({"name": "x", "kind": "nope"}, "expected one of burn_rate"),
    ({"name": "x", "kind": "burn_rate", "slo": "ttft_p50_s"}, "slo is 'ttft_p50_s'"),
    ({"name": "x", "kind": "threshold"}, "metric is missing"),
    ({"name": "x", "kind": "threshold", "metric": "log.queue_req", "op": "=="}, "op must be one of"),
    ({"name": "x", "kind": "event", "event": "meteor"}, "event is 'meteor'"),
    ({"name": "x", "kind": "event", "event": "crash", "for_s": "5m"}, "for_s is '5m'; expected a number"),
    ({"name": "x", "kind": "event", "event": "crash", "colour": "red"}, "colour is unknown"),
])
def test_bad_rules_say_what_is_wrong(raw: dict, needle: str) -> None:
    with pytest.raises(AlertRuleError, match=needle.replace("(", r"\(")):
        parse_rule(raw, "alerts[0]")


def test_user_rules_replace_and_switch_off_defaults() -> None:
    rules = build_rules([{"name": "crash", "severity": "warning"}, {"name": "oom", "enabled": False},
                         {"name": "mine", "kind": "threshold", "metric": "log.queue_req", "value": 5}])
    by = {r.name: r for r in rules}
    assert by["crash"].severity == "warning" and by["crash"].event == "crash"
    assert "oom" not in by and by["mine"].value == 5.0
    assert [r.name for r in build_rules([], defaults=False)] == []
    with pytest.raises(AlertRuleError, match="used twice"):
        build_rules([{"name": "a", "kind": "event", "event": "oom"}] * 2)
