"""Capture: a profile's `record_requests = true` makes its server write its own request records
into the data folder (the engine's record flags, Pitwall's own, last in argv), retention prunes
old ones, and a cut of them (the CLI's and the Traces page's) is what the server served.

The server is the simulator started with exactly the flags the launcher adds (SGLang's
request metrics exporter forms), a real process on loopback; the requests are real HTTP."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pwtest import free_port, run_page, wait_for
from sim_fixture import running_sim

from collectors.engines import get_engine
from collectors.trace.cut import cut
from collectors.trace.model import TraceError
from launching.profiles import ProfileError, dump_profile, parse_profile
from runner.launch_logs import retain_records
from storage import repo

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

HEAD = 'name = "rec"\nmodel_path = "org/m"\nentrypoint = "simulator.launch_server"\n'


def test_the_switch_is_a_profile_key_and_keeps_other_profiles_hashes() -> None:
    plain = parse_profile(HEAD + "[flags]\nenable-metrics = true\n")
    on = parse_profile(HEAD + "record_requests = true\n[flags]\nenable-metrics = true\n")
    off = parse_profile(HEAD + "record_requests = false\n[flags]\nenable-metrics = true\n")
    assert on.record_requests and not plain.record_requests and not off.record_requests
    assert plain.content_hash == off.content_hash != on.content_hash  # a profile without it: unchanged
    assert parse_profile(dump_profile(on)).record_requests and "record_requests" not in dump_profile(plain)
    with pytest.raises(ProfileError, match="record_requests is 'yes'; expected true or false"):
        parse_profile(HEAD + 'record_requests = "yes"\n')


def test_a_recording_profile_launches_with_its_records_folder_last(data_env, tmp_path, monkeypatch) -> None:
    from config.settings import load_settings
    from launching import launcher
    from storage.db import make_engine

    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "rec.toml").write_text(HEAD + "record_requests = true\n[flags]\nenable-metrics = true\n")
    monkeypatch.setenv("PITWALL_PROFILES_DIR", str(folder))
    settings = load_settings()
    engine = make_engine(settings.database_url)
    server = repo.upsert_server(engine, name="s1", base_url=f"http://127.0.0.1:{free_port()}", managed=True,
                                python=sys.executable, profile="rec")
    plan = launcher.Planner(settings, engine)(server, None, False)
    records = settings.requests_dir / "s1"
    assert plan.argv[-3:] == ["--enable-metrics", "--export-metrics-to-file", f"--export-metrics-to-file-dir={records}"]
    assert records.is_dir() and (records.stat().st_mode & 0o777) == 0o700
    assert repo.get_profile(engine, name="rec").record_requests  # type: ignore[union-attr]


def test_retention_removes_old_records_only(tmp_path: Path) -> None:
    now = time.time()
    folder = tmp_path / "requests"
    (folder / "a").mkdir(parents=True)
    old, new = folder / "a" / "old.log", folder / "a" / "new.log"
    old.write_text("x" * 10)
    new.write_text("y")
    os.utime(old, (now - 9 * 86400, now - 9 * 86400))
    (folder / "a" / "link.log").symlink_to(old)
    assert retain_records(folder, 7.0, now) == (1, 10)
    assert not old.exists() and new.exists()
    assert retain_records(folder, 0.0, now) == (0, 0)  # 0 keeps every file


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The simulator started with the record flags the launcher adds for server `sim`."""
    data = tmp_path_factory.mktemp("capture") / "data"
    records = data / "requests" / "sim"
    records.mkdir(parents=True)
    record_flags = get_engine("sglang").record_flags
    assert record_flags is not None
    args = ["--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--sim-speed", "50", *record_flags(str(records))]
    with running_sim(args, data / "sim.log") as url:
        for n in (5, 7, 9):
            r = httpx.post(f"{url}/generate", json={"text": "hello there " * n, "sampling_params": {
                "max_new_tokens": n, "ignore_eos": True}}, timeout=60)
            assert r.status_code == 200, r.text
        wait_for(lambda: sum(len(p.read_text().splitlines()) for p in records.iterdir()) >= 3, 30,
                 what="three request records")
        yield url, data


def test_a_cut_of_the_records_is_what_the_server_served(recording: tuple[str, Path], tmp_path: Path) -> None:
    from storage.db import make_engine

    url, data = recording
    engine = make_engine(f"sqlite:///{tmp_path / 'pitwall.db'}")
    repo.upsert_server(engine, name="sim", base_url=url, managed=False)
    built = cut(engine, "sim", since_s=3600, requests_dir=data / "requests", name="served")
    got = [(r.output_tokens, r.api) for r in built.trace.requests]
    assert got == [(5, "generate"), (7, "generate"), (9, "generate")]
    assert built.fields["format"] != "auto" and repo.get_trace(engine, name="served") is not None
    with pytest.raises(TraceError, match="set record_requests = true in its profile"):
        cut(engine, "sim", since_s=3600, requests_dir=tmp_path / "nowhere", source="metrics")


def test_the_traces_page_cuts_a_trace_from_a_server(recording: tuple[str, Path], app_env, monkeypatch) -> None:
    from storage.db import make_engine

    url, data = recording
    monkeypatch.setenv("PITWALL_DATA_DIR", str(data))  # the records are under this data folder
    eng = make_engine(app_env["PITWALL_DATABASE_URL"])
    repo.upsert_server(eng, name="sim", base_url=url, managed=False)
    at = run_page("dashboard/pages/traces.py")
    at.text_input(key="cut_name").set_value("from-page")
    at.button(key="FormSubmitter:trace_cut_form-Cut").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any(s.value.startswith("Stored from-page: 3 requests") for s in at.success)
    (audit,) = [a for a in repo.list_audit(eng) if a.action == "trace_cut"]
    assert audit.target == "sim" and audit.detail["requests"] == 3
