"""AppTest of dashboard/pages/traces.py: empty, then with the demo's trace (its figures, the
replay command, the import's notes as text), and a trace whose bad rows are listed; a replay asked
on the page is a pending run, a `probe` intent and an audit row (a bad window is refused with
what to change); the import, replay and cut controls are off in read-only mode."""

from __future__ import annotations

from pwtest import REPO, run_page

from collectors.trace import importer
from storage import repo

PAGE = "dashboard/pages/traces.py"


def _store(app_env, *files: str) -> None:
    from storage.db import make_engine

    eng = make_engine(app_env["PITWALL_DATABASE_URL"])
    for f in files:
        importer.store(eng, importer.build([REPO / f]))
    eng.dispose()


def test_no_traces_says_how_to_get_one(app_env) -> None:
    at = run_page(PAGE)
    assert any("pitwall trace import" in i.value for i in at.info)


def test_a_trace_is_previewed(app_env) -> None:
    _store(app_env, "tests/fixtures/traces/azure_2024_conv.csv", "traces/demo-chat.jsonl")  # newest first
    at = run_page(PAGE)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Requests"] == "288" and metrics["Duration"] == "120.0 s"
    assert metrics["Prefix reuse"].endswith("%") and metrics["Sessions"] == "241"
    assert any("--trace demo-chat --speed 1" in c.value and "--speed auto" in c.value for c in at.caption)
    at.selectbox(key="trace_pick").select("azure_2024_conv").run()
    assert not at.exception
    codes = "\n".join(c.value for c in at.code)
    assert any("--trace azure_2024_conv --speed 1" in c.value for c in at.caption)
    assert "the first arrival is at 2024-05-12" in codes
    assert any("1 row(s) could not be read" in m.value for m in at.markdown)
    from storage.db import make_engine

    assert len(repo.list_traces(make_engine(app_env["PITWALL_DATABASE_URL"]))) == 2


def test_a_replay_asked_on_the_page_is_queued_for_the_runner(app_env) -> None:
    from storage.db import make_engine

    _store(app_env, "traces/demo-chat.jsonl")
    eng = make_engine(app_env["PITWALL_DATABASE_URL"])
    repo.upsert_server(eng, name="sim", base_url="http://127.0.0.1:9", kind="llm", managed=False)
    at = run_page(PAGE)
    at.number_input(key="replay_speed").set_value(4.0)
    at.number_input(key="replay_from").set_value(30.0)
    at.number_input(key="replay_to").set_value(20.0)
    at.button(key="FormSubmitter:trace_replay-Replay").click().run()
    assert [e.value for e in at.error] == ["The window's end (20 s) must be after its start (30 s)."]
    assert repo.list_intents(eng) == []
    at.number_input(key="replay_to").set_value(90.0)
    at.button(key="FormSubmitter:trace_replay-Replay").click().run()
    assert not at.exception and not at.error
    assert any("Replay of demo-chat at 4x against sim queued" in s.value for s in at.success)
    (intent,) = repo.list_intents(eng)
    run = repo.get_probe_run(eng, run_id=intent.payload["run_id"])
    assert intent.kind == "probe" and intent.state == "pending" and run is not None and run.status == "pending"
    trace = repo.get_trace(eng, name="demo-chat")
    assert trace is not None
    assert {k: run.spec[k] for k in ("trace", "digest", "speed", "window", "url")} == {
        "trace": "demo-chat", "digest": trace.digest, "speed": 4.0, "window": [30.0, 90.0], "url": "http://127.0.0.1:9"}
    (audit,) = [a for a in repo.list_audit(eng) if a.action == "replay_start"]
    assert audit.target == "sim" and audit.detail["trace"] == "demo-chat"


def test_read_only_turns_the_import_and_the_replay_off(app_env, monkeypatch) -> None:
    from storage.db import make_engine

    _store(app_env, "traces/demo-chat.jsonl")
    repo.upsert_server(make_engine(app_env["PITWALL_DATABASE_URL"]), name="sim", base_url="http://127.0.0.1:9",
                       kind="llm", managed=False)
    monkeypatch.setenv("PITWALL_READ_ONLY", "1")
    at = run_page(PAGE)
    assert any("Read-only mode" in c.value for c in at.caption)
    labels = {b.label: b.disabled for b in at.button}
    assert labels == {"Import": True, "Replay": True, "Cut": True}
