"""The log-form drift guard (collectors/sglang/log_forms.py): a relaunch whose Decode batch lines
renamed a field the previous launch wrote in every line is one `metric_drift` event naming the
field as the log wrote it and what read it; optional fields, a role change and an unchanged log
raise nothing; batch lines in a form the parser does not read are named too."""

from __future__ import annotations

from pathlib import Path

from collectors.base import CollectorContext, ServerTarget
from collectors.sglang import log_forms
from collectors.sglang.log import SGLangLogCollector
from present.dependents import dependents

DECODE = ("[2026-12-05 12:00:{s:02d}] Decode batch, #running-req: 3, #token: 40, token usage: 0.10, "
          "cuda graph: True, gen throughput (token/s): 12.30, #queue-req: 0")
RENAMED = ("[2026-12-05 12:01:{s:02d}] Decode batch, #running: 3, #token: 40, token usage: 0.10, "
           "cuda graph: True, gen throughput (token/s): 12.30, #queue-req: 0")
FIELDS = ["running_req", "num_token", "token_usage", "cuda_graph", "gen_throughput", "queue_req"]


def test_a_steady_field_lost_on_relaunch_is_judged_once() -> None:
    state, drift = log_forms.step(None, 1, [("decode", FIELDS), ("decode", [*FIELDS, "replay_token"])] * 3, {})
    assert drift == []  # no previous launch
    renamed = [("decode", ["running", *FIELDS[1:]])] * 4
    state, drift = log_forms.step(state, 2, renamed, {})
    assert drift == []  # four records: not judged yet
    state, drift = log_forms.step(state, 2, renamed[:1], {})
    assert drift == [log_forms.FormDrift("decode", ("running_req",))]  # replay_token was never steady
    assert log_forms.step(state, 2, renamed, {})[1] == []  # once a launch


def test_each_kind_is_judged_on_its_own_and_a_short_previous_launch_sets_no_standard() -> None:
    state, _ = log_forms.step(None, 1, [("prefill", ["new_seq", "queue_req"]), ("decode", FIELDS)] * 5, {})
    state, drift = log_forms.step(state, 2, [("prefill", ["new_seq", "queue_req"])] * 5, {})
    assert drift == []  # prefill judged, unchanged; decode not yet
    state, drift = log_forms.step(state, 2, [("decode", FIELDS[1:])] * 5, {})
    assert drift == [log_forms.FormDrift("decode", ("running_req",))]  # judged when its own lines came
    one, _ = log_forms.step(None, 1, [("decode", [*FIELDS, "replay_token"])], {})  # one line only
    assert log_forms.step(one, 2, [("decode", FIELDS)] * 5, {})[1] == []


def test_an_unchanged_log_or_a_role_change_is_no_drift() -> None:
    state, _ = log_forms.step(None, 1, [("decode", FIELDS), ("prefill", ["new_seq"])] * 5, {})
    assert log_forms.step(state, 2, [("decode", FIELDS)] * 5, {})[1] == []
    # a prefill server of a PD service never logs Decode batch: its prefill lines are judged alone
    assert log_forms.step(state, 3, [("prefill", ["new_seq", "bootstrap_req"])] * 5, {})[1] == []


def test_batch_lines_the_parser_cannot_read_are_named() -> None:
    state, _ = log_forms.step(None, 1, [("decode", FIELDS), ("prefill", ["new_seq"])] * 5, {})
    # prefill lines still parse; decode lines no longer do
    _, drift = log_forms.step(state, 2, [("prefill", ["new_seq"])] * 5, {"decode": 5})
    assert drift == [log_forms.FormDrift("decode", (), 5)]


def test_a_crash_loop_of_short_launches_keeps_the_standard() -> None:
    state, _ = log_forms.step(None, 1, [("decode", FIELDS)] * 20, {})
    state, _ = log_forms.step(state, 2, [("decode", ["running", *FIELDS[1:]])] * 2, {})  # died after 2 lines
    _, drift = log_forms.step(state, 3, [("decode", ["running", *FIELDS[1:]])] * 5, {})
    assert drift == [log_forms.FormDrift("decode", ("running_req",))]


def test_a_state_from_before_kinds_were_judged_one_by_one_reads() -> None:
    old = {"current": {"epoch": 2, "kinds": {"decode": {"n": 5, "fields": {}}}, "unread": 0, "judged": True},
           "previous": {"epoch": 1, "kinds": {"decode": {"n": 5, "fields": {"running_req": 5}}}, "unread": 0,
                        "judged": True}}
    assert log_forms.step(old, 2, [("decode", FIELDS)], {})[1] == []  # judged already: no second event


def test_the_collector_raises_one_event_naming_the_field_and_its_readers(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    saved: dict = {}
    collector = SGLangLogCollector()
    collector.set_dependents(dependents)
    events = []
    for launch, form in ((1, DECODE), (2, RENAMED)):
        with log.open("a") as fh:
            fh.writelines(form.format(s=i) + "\n" for i in range(6))
        server = ServerTarget(1, "s", "http://127.0.0.1:1", log_path=str(log), launch_id=launch)
        ctx = CollectorContext(servers=[server], load_state=saved.get, save_state=saved.__setitem__, now=lambda: 1e9)
        events += [e for e in collector.poll(ctx).events if e.kind == "metric_drift"]
    collector.close()
    [event] = events
    assert event.launch_id == 2 and event.severity == "warning"
    assert "Decode batch lines no longer carry `#running-req`" in event.message
    assert "chart 'Running batch and queue' (Server page)" in event.message  # what read it
