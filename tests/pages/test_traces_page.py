"""AppTest of dashboard/pages/traces.py: empty, then with the demo's trace (its figures, the
replay command, the import's notes as text), and a trace whose bad rows are listed; the import
control is off in read-only mode."""

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
    codes = "\n".join(c.value for c in at.code)
    assert "--trace demo-chat --speed auto" in codes
    at.selectbox(key="trace_pick").select("azure_2024_conv").run()
    assert not at.exception
    codes = "\n".join(c.value for c in at.code)
    assert "--trace azure_2024_conv --speed 1" in codes and "the first arrival is at 2024-05-12" in codes
    assert any("1 row(s) could not be read" in m.value for m in at.markdown)
    from storage.db import make_engine

    assert len(repo.list_traces(make_engine(app_env["PITWALL_DATABASE_URL"]))) == 2


def test_read_only_turns_the_import_off(app_env, monkeypatch) -> None:
    monkeypatch.setenv("PITWALL_READ_ONLY", "1")
    at = run_page(PAGE)
    assert any("Read-only mode" in c.value for c in at.caption)
    assert all(b.disabled for b in at.button if b.label == "Import")
