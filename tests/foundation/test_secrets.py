"""Safe to expose: no page, export or CLI output shows the server's API key or the database password.

One world, built for real: a PostgreSQL server whose `pitwall` user has the password PGS3CRET
(TCP on 127.0.0.1, scram-sha-256) holds the database; the runner starts the bundled simulator
under a profile with `api-key = "S3CRET"` (and `HF_TOKEN = "S3CRET"` in its [env]), so the
Launch's argv and env, /server_info (api_key, launch_command) and the server log's
`server_args={... 'api_key': 'S3CRET' ...}` line all carry the key; a sweep runs against it with
the key; a relaunch to a crashing profile fails and rolls back (an Intent message, a log excerpt,
a relaunch_failed event); a validation runs. Rows a Pitwall from before write-time redaction
would have left (an Event and an Audit row holding the key) are inserted by hand.

Then every page (AppTest, every element's full proto: text, tables, charts, editors), every
export format (md, html, csv, json, png: its text chunks and the Vega specs handed to
vl-convert), `pitwall status`, `pitwall export` and `pitwall profiles list/diff/validate` are
grepped for both secrets. Without the PostgreSQL server binaries (Debian `postgresql`) the world
uses SQLite and the PostgreSQL URL is checked where it is printed (`test_database_url_...`,
which always runs).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from pwtest import REPO, free_port, run_page, wait_for
from streamlit.testing.v1 import AppTest

SECRET = "S3CRET"
PG_SECRET = "PGS3CRET"
SECRETS = (SECRET, PG_SECRET)
FAST_ENV = {"SGLANG_SIM_SPEED": "50", "SGLANG_SIM_STARTUP_S": "0.5", "SGLANG_SIM_SEED": "1"}
PG_BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
APP = str(REPO / "app.py")
PAGES = ["dashboard/pages/overview.py", "dashboard/pages/server.py", "dashboard/pages/benchmarks.py",
         "dashboard/pages/events.py", "dashboard/pages/compare.py", "dashboard/pages/profiles.py",
         "dashboard/pages/about.py", "dashboard/pages/tune.py"]

pytestmark = pytest.mark.timeout(600)


def leaks(text: str | bytes) -> list[str]:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return [s for s in SECRETS if s in text]


# ---------------------------------------------------------------------------------------------
# the world


def _as_postgres(*argv: str) -> subprocess.CompletedProcess[str]:
    runuser = shutil.which("runuser") or "runuser"
    cmd = list(argv) if os.geteuid() != 0 else [runuser, "-u", "postgres", "--", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _start_postgres(root: Path) -> tuple[str | None, str]:
    """(URL with the password, why not) of a throwaway cluster that requires the password."""
    if not PG_BIN:
        return None, "PostgreSQL server binaries not installed (apt-get install postgresql)"
    if os.geteuid() == 0 and not shutil.which("runuser"):
        return None, "runuser is missing; cannot run PostgreSQL as a non-root user"
    bindir, port = PG_BIN[-1], free_port()
    (root / "sock").mkdir()
    (root / "pw").write_text(PG_SECRET + "\n")
    if os.geteuid() == 0:
        for p in (root, root / "sock", root / "pw"):
            shutil.chown(p, "postgres")
    res = _as_postgres(f"{bindir}/initdb", "-D", str(root / "data"), "-U", "pitwall",
                       "-A", "scram-sha-256", f"--pwfile={root / 'pw'}")
    if res.returncode != 0:
        return None, f"initdb failed: {res.stderr.strip()[:200]}"
    res = _as_postgres(f"{bindir}/pg_ctl", "-D", str(root / "data"), "-w", "-l", str(root / "log"), "-o",
                       f"-k {root / 'sock'} -p {port} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
    if res.returncode != 0:
        return None, f"pg_ctl start failed: {res.stderr.strip()[:200]}"
    return f"postgresql+psycopg://pitwall:{PG_SECRET}@127.0.0.1:{port}/postgres", ""


def _profile(folder: Path, name: str, flags: str, env: dict[str, str]) -> None:
    env_lines = "\n".join(f'{k} = "{v}"' for k, v in env.items())
    (folder / f"{name}.toml").write_text(
        f'name = "{name}"\nmodel_path = "Qwen/Qwen2.5-7B-Instruct"\nentrypoint = "simulator.launch_server"\n'
        f'[flags]\nenable-metrics = true\n{flags}\n[env]\n{env_lines}\n')


def _final(engine: Any, intent_id: int) -> Any:
    from launching import launcher
    from storage import repo

    i = repo.get_intent(engine, intent_id=intent_id)
    return i if i is not None and i.state in launcher.FINAL_STATES else None


def _legacy_rows(engine: Any, server_id: int) -> None:
    """Rows as a Pitwall without write-time redaction left them (straight SQL, no repo)."""
    from sqlalchemy import insert

    from storage.models import Audit
    from storage.repo._common import EVENT

    raw = (f"[2026-12-02 12:14:36] server_args=ServerArgs(model_path='m', port=30000, "
           f"api_key='{SECRET}', admin_api_key=None)\nAuthorization: Bearer {SECRET}")
    with engine.begin() as conn:
        conn.execute(insert(EVENT), [{"ts": time.time() - 60, "server_id": server_id, "launch_id": None,
                                      "kind": "crash", "severity": "error",
                                      "message": f"sim died: python -m x --api-key {SECRET}", "raw": raw}])
        conn.execute(insert(Audit.__table__), [{  # type: ignore[attr-defined]
            "ts": time.time() - 30, "actor": "local", "action": "profile_edit", "target": "secret",
            "detail": {"hash": "h", "diff": [["flags.api-key", "—", SECRET]],
                       "env": {"PITWALL_DATABASE_URL": f"postgresql://pitwall:{PG_SECRET}@db/x"}}}])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    import streamlit as st

    from cli.wiring import runner_parts
    from config.settings import Settings
    from dashboard.services import profile_admin
    from dashboard.services.views import benchmarks as bm
    from launching import launcher
    from runner.loop import Runner
    from storage import repo
    from storage.db import make_engine

    tmp = tmp_path_factory.mktemp("secrets")
    pg_root = Path(tempfile.mkdtemp(prefix="pitwall-pg-"))  # pytest's tmp dirs are root-only
    url, why_not = _start_postgres(pg_root)
    url = url or f"sqlite:///{tmp / 'data' / 'pitwall.db'}"
    profiles = tmp / "profiles"
    profiles.mkdir()
    _profile(profiles, "secret", f'api-key = "{SECRET}"\nmax-running-requests = 8',
             {**FAST_ENV, "HF_TOKEN": SECRET})
    _profile(profiles, "crashy", f'api-key = "{SECRET}"\nmax-running-requests = 16',
             {**FAST_ENV, "SGLANG_SIM_FAULT": "crash-at-start"})
    _profile(profiles, "plain", "max-running-requests = 4", FAST_ENV)
    env = {"PITWALL_DATA_DIR": str(tmp / "data"), "PITWALL_DATABASE_URL": url, "PITWALL_CONFIG": "",
           "PITWALL_DEMO": "off", "PITWALL_PROFILES_DIR": str(profiles), "PITWALL_MANAGED_RUNNER": "1"}
    mp = pytest.MonkeyPatch()
    for k, v in env.items():
        mp.setenv(k, v)
    mp.setenv("PITWALL_PASSWORD", "PWS3CRET")  # what the runner holds: its children must not
    mp.chdir(tmp)
    engine = make_engine(url)
    port = free_port()
    log_path = tmp / "data" / "logs" / "sim.log"
    server = repo.upsert_server(engine, name="sim", base_url=f"http://127.0.0.1:{port}", managed=True,
                                python=sys.executable, profile="secret", log_path=str(log_path),
                                api_key=SECRET, gpu_hourly_usd=2.0)
    settings = Settings(data_dir=tmp / "data", database_url=url, profiles_dir=profiles)
    supervisor, handlers = runner_parts(settings, engine)
    runner = Runner(engine, [], supervisor=supervisor, intent_handlers=handlers, tick_s=0.05)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    out: dict[str, Any] = {"url": url, "postgres": why_not or "yes", "engine": engine, "env": env,
                           "server_id": server.id, "log": log_path}
    try:
        sid = server.id
        auto = wait_for(lambda: repo.list_intents(engine, server_id=sid, kinds=["launch"]), what="auto-start")[0]
        started = wait_for(lambda: _final(engine, auto.id), what="launch")
        assert started.state == "done", started.message
        launch = repo.latest_launch(engine, server_id=sid)
        environ = Path(f"/proc/{launch.pid}/environ").read_bytes().split(b"\0")
        out["server_env"] = dict(e.decode().split("=", 1) for e in environ if b"=" in e)
        out["log_modes"] = (stat.S_IMODE(log_path.stat().st_mode), stat.S_IMODE(log_path.parent.stat().st_mode))
        # a sweep with the key (the sweep process reads it from its stdin, a pipe)
        run_id, _ = bm.start_sweep(engine, bm.SweepRequest(server="sim", levels=[1], requests=3, max_new_tokens=8))
        cmdlines: list[str] = []

        def swept() -> bool:
            for child in psutil.Process().children(recursive=True):
                try:
                    cmd = " ".join(child.cmdline())
                except psutil.Error:
                    continue
                if "sweep_child" in cmd:
                    cmdlines.append(cmd)
            run = repo.get_probe_run(engine, run_id=run_id)
            return run is not None and run.status in ("done", "failed", "aborted")

        wait_for(swept, what="the sweep", poll_s=0.2)
        out["run_id"], out["sweep_cmdlines"] = run_id, cmdlines
        assert repo.get_probe_run(engine, run_id=run_id).status == "done", repo.get_probe_run(engine, run_id=run_id).error
        # a relaunch that fails and rolls back: message, excerpt and events from a real log
        bad = launcher.request(engine, kind="relaunch", server_name="sim", actor="tester", profile="crashy")
        assert wait_for(lambda: _final(engine, bad.id), what="relaunch").progress["stage"] == "rolled back"
        check = profile_admin.request_validation(engine, profile="secret", server_name="sim", actor="tester")
        wait_for(lambda: _final(engine, check.id), what="validation")
        # the server's own server_args line, as an excerpt written through the repo
        args_line = next(ln for ln in log_path.read_text().splitlines() if "server_args=" in ln)
        assert f"'api_key': '{SECRET}'" in args_line  # the simulator logs what SGLang 0.5.23 logs
        repo.add_event(engine, kind="crash", server_id=sid, severity="error", message="excerpt", raw=args_line)
        _legacy_rows(engine, sid)
    finally:
        runner.stop()
        thread.join(60)
        mp.delenv("PITWALL_PASSWORD")
    st.cache_data.clear()
    st.cache_resource.clear()
    try:
        yield out
    finally:
        st.cache_data.clear()
        st.cache_resource.clear()
        engine.dispose()
        mp.undo()
        if url.startswith("postgresql"):
            _as_postgres(f"{PG_BIN[-1]}/pg_ctl", "-D", str(pg_root / "data"), "-m", "immediate", "stop")
        shutil.rmtree(pg_root, ignore_errors=True)


@pytest.fixture
def pitwall_env(world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    for k, v in world["env"].items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(Path(world["env"]["PITWALL_DATA_DIR"]).parent)
    return world


# ---------------------------------------------------------------------------------------------
# what is stored, what a child gets


@pytest.mark.integration
def test_the_world_carries_the_secrets_where_pitwall_needs_them(world):
    from storage import repo

    engine, sid = world["engine"], world["server_id"]
    launches = repo.list_launches(engine, server_id=sid)
    # argv and env are exact: a rollback starts them again
    # the key is in a 0600 file the argv names (`--config PATH`, two tokens, last), never in argv
    keyed = [la for la in launches if la.profile_name in ("secret", "crashy")]
    assert keyed and all(la.argv[-2] == "--config" and not leaks(" ".join(la.argv)) for la in keyed)
    kept = [Path(la.argv[-1]) for la in keyed if Path(la.argv[-1]).exists()]
    assert kept and all(stat.S_IMODE(p.stat().st_mode) == 0o600 and SECRET in p.read_text() for p in kept)
    assert all(la.env.get("HF_TOKEN") == SECRET for la in launches if la.profile_name == "secret")
    ready = [la for la in launches if la.server_args]
    assert ready and not any(leaks(json.dumps(la.server_args)) for la in ready)
    assert not any(leaks(str(la.end_reason)) for la in launches)
    events = repo.list_events(engine, server_id=sid, limit=500)
    assert len([r for r in events["raw"].dropna() if leaks(r)]) == 1  # only the legacy row
    assert {"relaunch_failed", "rollback", "server_ready"} <= set(events["kind"])
    for intent in repo.list_intents(engine, limit=50):
        assert not leaks(json.dumps([intent.message, intent.result, intent.progress], default=str))
    run = repo.get_probe_run(engine, run_id=world["run_id"])
    assert not leaks(json.dumps(run.spec)) and not leaks(str(run.error))


@pytest.mark.integration
def test_a_server_inherits_no_pitwall_secret_and_logs_privately(world):
    env = world["server_env"]
    assert not [k for k in env if k.startswith("PITWALL_")], sorted(env)
    assert env["HF_TOKEN"] == SECRET  # what its profile asks for, it gets
    assert world["log_modes"] == (0o600, 0o700)
    # the sweep process got the database URL by environment: nothing secret in its argv
    assert not [c for c in world["sweep_cmdlines"] if leaks(c)]


# ---------------------------------------------------------------------------------------------
# pages


def _page_text(at: AppTest) -> str:
    """Every element and block of the rendered page, as its full proto (text, tables as Arrow,
    chart specs and data, editors, labels, help)."""
    return "\n".join(str(node.proto) for node in at._tree if getattr(node, "proto", None) is not None)


def _open(page: str, **params: str) -> AppTest:
    return run_page(page, 120.0, **params)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_no_page_shows_a_secret(pitwall_env, page):
    at = _open(page, server="sim", window="6h")
    texts = [_page_text(at)]
    if page.endswith("events.py"):  # every raw excerpt, one at a time
        # labels read "#<event id> · time · kind"; AppTest sets the widget through its state
        ids = [int(o.split(" ", 1)[0].lstrip("#")) for o in at.selectbox(key="ev_raw_pick").options]
        assert len(ids) >= 4  # relaunch_failed, rollback, the excerpt, the legacy crash
        excerpts = []
        for event_id in ids:
            at.session_state["ev_raw_pick"] = event_id
            at.run()
            texts.append(_page_text(at))
            excerpts += [c.value for c in at.code]
        shown = "\n".join(excerpts)  # the excerpts are there, their keys masked
        assert "'api_key': '***'" in shown and "api_key='***'" in shown and "Bearer ***" in shown
    if page.endswith("compare.py"):  # the probe run's scorecard (workload spec, launch args)
        at.multiselect(key="cmp_pick_run").set_value([pitwall_env["run_id"]]).run()
        texts.append(_page_text(at))
    text = "\n".join(texts)
    if page.endswith("server.py"):  # the launch command is there, its key masked
        assert any("--config" in c.value for c in at.code)
    if page.endswith("profiles.py"):
        assert "api-key" in text and "***" in text  # the editor shows the flag, masked
    if page.endswith("about.py") and pitwall_env["url"].startswith("postgresql"):
        assert "pitwall:***@127.0.0.1" in text
    assert not leaks(text), page


# ---------------------------------------------------------------------------------------------
# exports


def _png_text_chunks(data: bytes) -> list[bytes]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, pos = [], 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"zTXt":
            key, _, rest = body.partition(b"\0")
            body = key + b"\0" + zlib.decompress(rest[1:])
        if kind in (b"tEXt", b"zTXt", b"iTXt"):
            chunks.append(body)
        pos += 12 + length
    return chunks


@pytest.mark.slow
def test_no_export_contains_a_secret(pitwall_env, monkeypatch):
    import vl_convert

    from export import formats
    from scorecard.build import build_scorecard
    from storage import repo

    specs: list[Any] = []
    for name in ("vegalite_to_png", "vegalite_to_svg"):
        real = getattr(vl_convert, name)
        monkeypatch.setattr(vl_convert, name,
                            lambda spec, *a, _real=real, **k: (specs.append(spec), _real(spec, *a, **k))[1])
    engine, sid = pitwall_env["engine"], pitwall_env["server_id"]
    launches = [la.id for la in repo.list_launches(engine, server_id=sid) if la.ready_at]
    cards = [build_scorecard(engine, run_id=pitwall_env["run_id"]),
             build_scorecard(engine, server="sim", since_s=3600),
             *[build_scorecard(engine, launch_id=i) for i in launches[:2]]]
    assert cards[0].provenance["argv"] and "--config" in cards[0].provenance["argv"]
    for fmt in ("md", "html", "csv", "json"):
        for subset in (cards[:1], cards):  # one scorecard, and a comparison (config diff)
            assert not leaks(formats.render(fmt, subset)), fmt
    png = formats.render("png", cards)
    assert not [c for c in _png_text_chunks(png) if leaks(c)]
    assert specs and not leaks(json.dumps(specs, default=str))
    assert not leaks(json.dumps([c.to_dict() for c in cards], default=str))


# ---------------------------------------------------------------------------------------------
# the command line


@pytest.mark.slow
def test_no_cli_output_contains_a_secret(pitwall_env, capsys, tmp_path):
    from cli.main import main

    runs = [["status"], ["profiles", "list"], ["profiles", "list", "--json"],
            ["profiles", "diff", "secret", "plain"], ["profiles", "diff", "secret", "crashy"],
            ["profiles", "validate", "secret", "--bundled", "--server", "sim"]]
    for fmt in ("md", "html", "csv", "json"):
        runs.append(["export", "--server", "sim", "--since", "1h", "--format", fmt, "--output", "-"])
        runs.append(["export", "--server", "sim", "--run", str(pitwall_env["run_id"]), "--format", fmt,
                     "--output", str(tmp_path / f"card.{fmt}")])
    runs.append(["export", "--server", "sim", "--format", "png", "--output", str(tmp_path / "card.png")])
    for argv in runs:
        code = main(argv)
        out = capsys.readouterr()
        assert code == 0, (argv, out.err)
        assert not leaks(out.out + out.err), argv
    assert "api-key" in main_output(["profiles", "diff", "secret", "plain"], capsys)
    for path in tmp_path.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        data = path.read_bytes()
        assert not leaks(data if path.suffix != ".png" else b"".join(_png_text_chunks(data))), path


def main_output(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    from cli.main import main

    main(argv)
    return capsys.readouterr().out


def test_database_url_password_is_masked_wherever_it_is_printed(data_env, monkeypatch, capsys):
    """Runs with or without a PostgreSQL server: the URL is printed by `pitwall status`, its
    error when the database cannot be opened, and the About page."""
    import streamlit as st

    from cli.main import main
    from dashboard.services.views import session as session_view
    from storage import db

    port = free_port()  # nothing listens: the open fails and the error names the database
    url = f"postgresql+psycopg://pitwall:{PG_SECRET}@127.0.0.1:{port}/pitwall"
    monkeypatch.setenv("PITWALL_DATABASE_URL", url)
    assert main(["status"]) != 0
    err = capsys.readouterr().err
    assert "cannot open the database" in err.lower() and not leaks(err)
    for argv in (["export", "--server", "x", "--format", "md"], ["profiles", "list"]):
        main(argv)
        out = capsys.readouterr()
        assert not leaks(out.out + out.err), argv
    # the same URL in front of a working database (SQLite behind it): status and About page
    sqlite_url = data_env["PITWALL_DATABASE_URL"]
    real_make = db.make_engine
    monkeypatch.setattr(db, "make_engine", lambda u, **k: real_make(sqlite_url, **k))
    monkeypatch.setattr(session_view, "open_engine", lambda u: real_make(sqlite_url))
    real_make(sqlite_url).dispose()  # status reads an existing database and creates none
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "pitwall:***@127.0.0.1" in out and not leaks(out)
    monkeypatch.setenv("PITWALL_MANAGED_RUNNER", "1")
    st.cache_data.clear()
    st.cache_resource.clear()
    try:
        at = _open("dashboard/pages/about.py")
        text = _page_text(at)
        assert "pitwall:***@127.0.0.1" in text and not leaks(text)
    finally:
        st.cache_data.clear()
        st.cache_resource.clear()
