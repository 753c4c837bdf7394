"""AppTest of the Server page's Doctor: "Make candidate profile" writes the candidate under the
data folder (launch.profiles.candidates_dir), never into the profiles folder it read the base from
(the repository's profiles/ by default: the source tree)."""

from __future__ import annotations

import time
import tomllib

from pwtest import REPO
from streamlit.testing.v1 import AppTest

from storage import repo

APP = str(REPO / "app.py")
GIB = 2**30


def _server_page() -> AppTest:
    """The Server page of server `s` over 15 minutes, run once without an exception."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["server"], at.query_params["window"] = "s", "15m"
    at.run()
    at.switch_page("dashboard/pages/server.py")
    at.run()
    at.run()  # the Doctor draws after the charts: on the next run (a timed one in the browser)
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_make_candidate_writes_under_the_data_folder(app_env, tmp_path, monkeypatch):
    from storage.db import make_engine

    source = tmp_path / "source-profiles"
    source.mkdir()
    (source / "base.toml").write_text('name = "base"\nmodel_path = "m"\nentrypoint = "simulator.launch_server"\n'
                                      '[flags]\nmax-running-requests = 64\n')
    monkeypatch.setenv("PITWALL_PROFILES_DIR", str(source))
    eng = make_engine(app_env["PITWALL_DATABASE_URL"])
    srv = repo.upsert_server(eng, name="s", base_url="http://127.0.0.1:1", managed=True, profile="base")
    now = time.time()
    # 80 GiB card with 77 GiB used: 3 GiB free, under the doctor's 5 GiB headroom
    with eng.begin() as conn:
        repo.insert_samples(conn, rows=[
            {"ts": now - 30 + i, "server_id": srv.id, "launch_id": None, "source": "gpu", "metric": m, "value": v}
            for i in range(3)
            for m, v in (("gpu.0.mem_total_bytes", 80 * GIB), ("gpu.0.mem_used_bytes", 77 * GIB),
                         ("api.health_ok", 1.0))])
    eng.dispose()
    at = _server_page()
    at.button(key="doctor_gpu_headroom").click().run()
    assert not at.exception, [e.value for e in at.exception]
    written = sorted((tmp_path / "data" / "profiles").glob("*.toml"))
    assert [p.name for p in source.glob("*.toml")] == ["base.toml"]  # nothing new in the source folder
    assert len(written) == 1
    data = tomllib.loads(written[0].read_text())
    assert data["flags"] == {"max-running-requests": 64, "mem-fraction-static": 0.8}
    assert any(str(tmp_path / "data" / "profiles") in s.value for s in at.success)


def test_a_quiet_doctor_shows_what_each_rule_read(app_env):
    from storage.db import make_engine

    eng = make_engine(app_env["PITWALL_DATABASE_URL"])
    srv = repo.upsert_server(eng, name="s", base_url="http://127.0.0.1:1", managed=True)
    now = time.time()
    # 80 GiB card with 20 GiB used: 60 GiB free, far above the 5 GiB headroom: no finding
    with eng.begin() as conn:
        repo.insert_samples(conn, rows=[
            {"ts": now - 30 + i, "server_id": srv.id, "launch_id": None, "source": "gpu", "metric": m, "value": v}
            for i in range(3)
            for m, v in (("gpu.0.mem_total_bytes", 80 * GIB), ("gpu.0.mem_used_bytes", 20 * GIB))])
    eng.dispose()
    at = _server_page()
    text = "\n".join(m.value for m in at.markdown).replace("\\", "")  # markdown-escaped text
    assert "GPU memory headroom: the fullest GPU has 60.0 GiB free" in text
    assert "Prefill OOMs: 0" in text
