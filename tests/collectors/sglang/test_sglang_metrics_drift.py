"""The metric drift guard (collectors/sglang/metrics_catalog.py): a family that a launch exported
and the next does not, that changed type or lost a label, judged once both launches served
traffic for the settle time; lazily created families are never called vanished."""

from __future__ import annotations

import json

from collectors.base import CollectorContext, ServerTarget
from collectors.promtext import parse_metrics
from collectors.sglang.metrics import SGLangMetricsCollector
from collectors.sglang.metrics_catalog import families_of, keys_of, step
from present.dependents import dependents
from runner.alerts.rules import build_rules
from scorecard.metric_specs import spec
from storage import series_keys as sk

LABELS = 'model_name="m",engine_type="unified",tp_rank="0"'


def payload(*, served: float, itl: str = "inter_token_latency_seconds", extra: str = "",
            itl_labels: str = LABELS) -> str:
    """A small /metrics text in SGLang's forms: the traffic counter, a gauge and the ITL histogram."""
    return "\n".join([
        "# HELP sglang:prompt_tokens_total Prompt tokens.", "# TYPE sglang:prompt_tokens_total counter",
        f"sglang:prompt_tokens_total{{{LABELS}}} {served}",
        "# HELP sglang:num_queue_reqs Queue.", "# TYPE sglang:num_queue_reqs gauge",
        f"sglang:num_queue_reqs{{{LABELS}}} 0",
        f"# HELP sglang:{itl} ITL.", f"# TYPE sglang:{itl} histogram",
        f'sglang:{itl}_bucket{{{itl_labels},le="0.01"}} 1', f'sglang:{itl}_bucket{{{itl_labels},le="+Inf"}} 1',
        f"sglang:{itl}_sum{{{itl_labels}}} 0.005", f"sglang:{itl}_count{{{itl_labels}}} 1",
        "# HELP python_gc_objects_collected_total GC.", "# TYPE python_gc_objects_collected_total counter",
        'python_gc_objects_collected_total{generation="0"} 5',
        extra, ""])


def run(scrapes: list[tuple[int | None, str, float]], settle_s: float = 10.0) -> list[list]:
    state, out = None, []
    for epoch, text, ts in scrapes:
        state, drift = step(state, epoch, parse_metrics(text), ts, settle_s=settle_s)
        out.append(drift)
    return out


def test_catalogue_holds_sglang_families_with_their_types_and_label_names() -> None:
    fams = families_of(parse_metrics(payload(served=3)))
    assert set(fams) == {"sglang:prompt_tokens", "sglang:num_queue_reqs", "sglang:inter_token_latency_seconds"}
    assert fams["sglang:inter_token_latency_seconds"] == ("histogram", ("engine_type", "model_name", "tp_rank"), True)
    assert fams["sglang:prompt_tokens"][0] == "counter"
    # a family declared with no series says nothing of its labels
    empty = "# HELP sglang:num_paused_reqs x\n# TYPE sglang:num_paused_reqs gauge\n"
    assert families_of(parse_metrics(payload(served=3, extra=empty)))["sglang:num_paused_reqs"] == ("gauge", (), False)


def test_a_renamed_family_is_one_drift_judged_after_the_new_launch_settles() -> None:
    old, new = payload(served=5, itl="time_per_output_token_seconds"), payload(served=5)
    found = run([(1, payload(served=0, itl="time_per_output_token_seconds"), 0.0), (1, old, 5.0), (1, old, 30.0),
                 (2, payload(served=0), 40.0), (2, new, 45.0), (2, new, 50.0), (2, new, 56.0), (2, new, 90.0)])
    assert [len(d) for d in found] == [0, 0, 0, 0, 0, 0, 1, 0]  # judged once, 10 s after traffic
    [drift] = found[6]
    assert (drift.family, drift.change) == ("sglang:time_per_output_token_seconds", "vanished")
    assert drift.served_by == "sglang:inter_token_latency_seconds"  # the alias table knows the rename
    assert sk.hist_key("itl", "p99") in drift.keys


def test_nothing_is_judged_before_traffic_or_without_a_previous_launch() -> None:
    quiet = run([(1, payload(served=5), 0.0), (1, payload(served=5), 100.0),
                 (2, payload(served=0, itl="other_seconds"), 110.0), (2, payload(served=0), 500.0)])
    assert all(not d for d in quiet)  # launch 2 never served a request: nothing to compare


def test_a_family_born_late_in_the_old_launch_is_never_called_vanished() -> None:
    aborts = ("# HELP sglang:num_aborted_requests_total Aborts.\n# TYPE sglang:num_aborted_requests_total counter\n"
              f"sglang:num_aborted_requests_total{{{LABELS}}} 1")
    found = run([(1, payload(served=1), 0.0), (1, payload(served=9, extra=aborts), 500.0),
                 (2, payload(served=1), 600.0), (2, payload(served=2), 700.0)])
    assert all(not d for d in found)  # first seen 500 s after traffic: the new launch may not have aborted yet


def test_a_type_change_and_a_lost_label_are_drift_as_soon_as_the_family_shows() -> None:
    gauge = "# HELP sglang:inter_token_latency_seconds x\n# TYPE sglang:inter_token_latency_seconds gauge\n"
    text = payload(served=1, itl="x_seconds") + gauge + f"sglang:inter_token_latency_seconds{{{LABELS}}} 0.1\n"
    [[typed]] = [d for d in run([(1, payload(served=1), 0.0), (2, text, 10.0)]) if d]
    assert (typed.change, typed.before, typed.after) == ("type", "histogram", "gauge")
    fewer = payload(served=1, itl_labels='model_name="m",engine_type="unified"')
    [[lost]] = [d for d in run([(1, payload(served=1), 0.0), (2, fewer, 10.0)]) if d]
    assert (lost.change, lost.before) == ("labels", "tp_rank")


def test_a_watched_server_starts_a_new_epoch_when_its_counters_go_back() -> None:
    old = "time_per_output_token_seconds"
    found = run([(None, payload(served=0, itl=old), 0.0), (None, payload(served=50, itl=old), 5.0),
                 (None, payload(served=2), 20.0), (None, payload(served=3), 31.0)])
    assert [len(d) for d in found] == [0, 0, 0, 1]
    # met mid-life (serving already at Pitwall's first scrape): what it exported then may have
    # been created late, so nothing is called gone after its restart
    assert not any(run([(None, payload(served=50, itl=old), 0.0), (None, payload(served=2), 20.0),
                        (None, payload(served=3), 31.0)]))
    # a scrape whose traffic counter reads NaN is no restart
    nan = payload(served=1).replace(f"sglang:prompt_tokens_total{{{LABELS}}} 1", f"sglang:prompt_tokens_total{{{LABELS}}} NaN")
    state, _ = step(None, None, parse_metrics(payload(served=0)), 0.0)
    state, _ = step(state, None, parse_metrics(payload(served=40)), 1.0)
    state, _ = step(state, None, parse_metrics(nan), 2.0)
    assert state["current"]["served"] == 40 and "previous" not in state


def test_a_family_first_seen_without_a_series_is_judged_on_its_labels_once_it_has_one() -> None:
    empty = ("# HELP sglang:inter_token_latency_seconds x\n# TYPE sglang:inter_token_latency_seconds histogram\n")
    no_itl = payload(served=2, itl="x_seconds")
    found = run([(1, payload(served=0), 0.0), (1, payload(served=3), 1.0),
                 (2, no_itl + empty, 5.0),  # declared, no series yet: no label judgement
                 (2, payload(served=3, itl_labels='model_name="m",engine_type="unified"'), 6.0)])
    assert [len(d) for d in found] == [0, 0, 0, 1]
    [lost] = found[3]
    assert (lost.change, lost.before) == ("labels", "tp_rank")


def test_an_epoch_that_served_nothing_does_not_replace_the_one_before() -> None:
    old = "time_per_output_token_seconds"
    found = run([(1, payload(served=0, itl=old), 0.0), (1, payload(served=5, itl=old), 1.0),
                 (2, payload(served=0), 2.0),  # relaunched before any request
                 (3, payload(served=0), 3.0), (3, payload(served=4), 4.0), (3, payload(served=5), 15.0)])
    assert [len(d) for d in found] == [0, 0, 0, 0, 0, 1]


def test_a_rename_that_covers_only_some_keys_is_not_served() -> None:
    from collectors.sglang.metrics_catalog import _serving

    assert _serving(keys_of("sglang:queue_time_seconds"), {"sglang:avg_request_queue_latency": None}) is None
    assert _serving(keys_of("sglang:time_per_output_token_seconds"),
                    {"sglang:inter_token_latency_seconds": None}) == "sglang:inter_token_latency_seconds"


def test_a_scrape_a_parse_bound_cut_is_not_judged() -> None:
    bad = payload(served=5).replace("sglang:num_queue_reqs{", "sglang:num_queue_reqs{{{")
    assert parse_metrics(bad).errors
    found = run([(1, payload(served=5), 0.0), (2, bad, 1.0), (2, bad, 20.0), (2, payload(served=6), 21.0)])
    assert [len(d) for d in found] == [0, 0, 0, 0]


def test_dependents_name_the_figure_the_chart_and_the_rule_that_read_a_key() -> None:
    said = dependents(keys_of("sglang:inter_token_latency_seconds"))
    # the percentiles of one quantity are one phrase
    assert said == ["scorecard figures 'Server ITL p50/p95/p99 (histogram)' "
                    "(server_itl_p50_s, server_itl_p95_s, server_itl_p99_s)"], said
    assert spec("server_itl_p99_s").label == "Server ITL p99 (histogram)"
    queue = dependents(keys_of("sglang:num_queue_reqs"),
                       build_rules([{"name": "queue-deep", "kind": "threshold", "metric": sk.METRICS_NUM_QUEUE_REQS,
                                     "op": ">", "value": 10}], defaults=False))
    assert any(p.startswith("chart ") for p in queue) and "alert rule 'queue-deep'" in queue
    assert dependents(["metrics.nothing_reads_this"]) == []


def test_the_collector_writes_one_event_naming_the_family_and_what_read_it() -> None:
    states: dict[str, dict] = {}
    col = SGLangMetricsCollector()
    col.configure({"metrics_drift_settle_s": 5})
    col.set_dependents(dependents)
    events = []
    for launch, text, ts in [(1, payload(served=0, itl="time_per_output_token_seconds"), -1.0),
                             (1, payload(served=3, itl="time_per_output_token_seconds"), 0.0),
                             (2, payload(served=1), 10.0), (2, payload(served=2), 16.0), (2, payload(served=3), 30.0)]:
        ctx = CollectorContext([], states.get, states.__setitem__, now=lambda ts=ts: ts)
        server = ServerTarget(7, "demo", "http://127.0.0.1:1", launch_id=launch)
        events += [e for e in col.ingest(ctx, server, text, ts).events if e.kind == "metric_drift"]
    col.close()
    [event] = events
    assert "sglang:time_per_output_token_seconds is no longer exported" in event.message
    assert "since launch #2" in event.message and "Server ITL p50/p95/p99 (histogram)" in event.message
    assert event.severity == "info"  # a rename Pitwall reads through: the figures go on
    assert json.loads(event.raw or "[]")[0]["served_by"] == "sglang:inter_token_latency_seconds"


def test_a_family_first_written_after_the_first_scrape_counts_from_zero_and_one_that_blinks_does_not() -> None:
    """SGLang's multiprocess registry shows a family from its first write: its first value is the
    window's increase. A family a scrape lost and the next one has again goes on from its last
    baseline (never its whole count as one window's increase)."""
    from collectors.sglang.metrics_window import window

    loads = ("# HELP sglang:load_back_tokens_total x\n# TYPE sglang:load_back_tokens_total counter\n"
             'sglang:load_back_tokens_total{cache_type="HiRadixCache",tp_rank="0",pp_rank="0",dp_rank="0",pool="kv"} ')
    w0 = window(parse_metrics(payload(served=1)), None, 0.0)
    w1 = window(parse_metrics(payload(served=2, extra=loads + "800")), w0.state, 10.0)
    assert w1.values["metrics.load_back_tokens_per_s"] == 80.0  # 800 tokens in 10 s: counted from zero
    w2 = window(parse_metrics(payload(served=3)), w1.state, 20.0)  # a scrape without the family
    assert "metrics.load_back_tokens_per_s" not in w2.values
    w3 = window(parse_metrics(payload(served=4, extra=loads + "1000")), w2.state, 30.0)
    assert w3.values["metrics.load_back_tokens_per_s"] == 20.0  # 200 more since 800, over 10 s


def test_a_non_finite_count_leaves_the_catalogue_storable() -> None:
    """A server that sends +Inf or NaN counters (tests/hostile_servers.py) must not make the
    catalogue's state unstorable: the runner's writer refuses state that is not strict JSON."""
    bad = payload(served=5).replace("sglang:prompt_tokens_total{" + LABELS + "} 5", "sglang:prompt_tokens_total{"
                                    + LABELS + "} +Inf")
    assert "+Inf" in bad
    state = None
    for ts, text in enumerate((bad, bad.replace("+Inf", "NaN"))):
        state, _ = step(state, 1, parse_metrics(text), float(ts))
        json.dumps(state, allow_nan=False)  # raises on NaN or infinity


def test_a_family_a_bad_scrape_missed_is_a_baseline_not_a_lifetime_in_one_window() -> None:
    """A family absent from a scrape that a bad line (or a parse bound) cut short may have been
    there all along: it is its own baseline, never its whole count as one window's increase."""
    from collectors.sglang.metrics_window import window

    broken = payload(served=1).replace("sglang:prompt_tokens_total{", "sglang:prompt_tokens_total{{")
    assert parse_metrics(broken).errors
    w0 = window(parse_metrics(broken), None, 0.0)
    w1 = window(parse_metrics(broken), w0.state, 10.0)  # still broken: no baseline for it yet
    w2 = window(parse_metrics(payload(served=1_000_000)), w1.state, 20.0)
    assert "metrics.prompt_tokens_per_s" not in w2.values  # a baseline now, not 100,000 tok/s
    w3 = window(parse_metrics(payload(served=1_000_200)), w2.state, 30.0)
    assert w3.values["metrics.prompt_tokens_per_s"] == 20.0
    # state written by a Pitwall that did not list what it read: the same
    old = dict(w0.state)
    old.pop("seen")
    assert "metrics.prompt_tokens_per_s" not in window(parse_metrics(payload(served=500)), old, 10.0).values


def test_a_steady_managed_server_does_not_rewrite_its_catalogue_every_scrape() -> None:
    """The catalogue is saved when it changes: its families, its first traffic, its judgement;
    a managed server's growing counters are not part of it."""
    states: dict[str, dict] = {}
    writes: list[str] = []

    def save(key: str, value: dict) -> None:
        writes.append(key)
        states[key] = value

    col = SGLangMetricsCollector()
    server = ServerTarget(7, "demo", "http://127.0.0.1:1", launch_id=1)
    for ts, served in enumerate((0, 3, 5, 8, 13, 21)):
        ctx = CollectorContext([], states.get, save, now=lambda ts=ts: float(ts))
        col.ingest(ctx, server, payload(served=served), float(ts))
    col.close()
    catalogue = [k for k in writes if k.endswith(":catalog")]
    assert len(catalogue) == 2, catalogue  # its families at the first scrape, its first traffic at the second
