"""AppTest smoke and behaviour tests of every page on a seeded database (no browser)."""

from __future__ import annotations

import re

import pytest
from pages_seed import HOSTILE, seed
from pwtest import REPO
from streamlit.testing.v1 import AppTest

APP = str(REPO / "app.py")


@pytest.fixture
def seeded(app_env):
    from storage.db import make_engine

    engine = make_engine(app_env["PITWALL_DATABASE_URL"])
    ids = seed(engine)
    engine.dispose()
    return ids


def _run(page: str | None = None, **params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    if page is not None:
        at.switch_page(page)
        at.run()
    return at


def _no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    texts = " ".join(str(e.value) for e in at.error)
    assert "Traceback" not in texts


def _all_text(at: AppTest) -> str:
    parts = []
    for kind in ("markdown", "caption", "text", "code", "metric", "info", "warning", "error", "success", "title"):
        for el in getattr(at, kind):
            parts.append(str(getattr(el, "value", "")))
            if kind == "metric":
                parts.append(str(el.label))
    for el in at.get("progress"):
        parts.append(el.proto.text)
    # markdown sources escape names (md_escape): compare what a reader sees
    return re.sub(r"\\([\\`*_{}\[\]()#+\-.!|<>:~$])", r"\1", "\n".join(parts))


PAGES = ["dashboard/pages/overview.py", "dashboard/pages/server.py", "dashboard/pages/benchmarks.py",
         "dashboard/pages/events.py", "dashboard/pages/about.py"]


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_on_an_empty_database(app_env, page):
    at = _run(page)
    _no_exception(at)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_on_the_seeded_database(seeded, page):
    at = _run(page, server="alpha", window="6h")
    _no_exception(at)


def test_overview_empty_state_says_how_to_add_a_server(app_env):
    at = _run()
    text = _all_text(at)
    assert "No servers yet" in text and "pitwall.toml" in text
    assert "Runner not running" in text  # no lease in a fresh database


def test_overview_cards_show_status_figures_grades_and_gpus(seeded):
    at = _run()
    _no_exception(at)
    text = _all_text(at)
    assert "alpha" in text and "beta" in text
    assert ":green-badge[up]" in text and ":red-badge[down]" in text
    # 1,000 tok/s; 2.00 USD x 2 GPUs / (1,000 x 3,600) x 1e6 = 1.111 USD / 1M tok
    usd = [m.value for m in at.metric if m.label == "USD / 1M tok"]
    assert usd == ["$1.11", "—"]  # alpha priced; beta has no price and no throughput
    # grades come from the scorecard service: alpha meets the default latency target
    assert "latency" in text.lower() and ":green-badge[pass]" in text
    assert "GPU 0 · mem 40.0 GiB / 80.0 GiB" in text
    assert "No GPU telemetry on this host" in text  # beta has none
    assert "health check failing" in text.lower()


def test_server_page_shows_version_args_and_charts(seeded):
    at = _run("dashboard/pages/server.py", server="alpha", window="6h")
    _no_exception(at)
    text = _all_text(at)
    assert "0.5.23" in text and "fast" in text
    assert "sglang.launch_server" in text  # launch command, shown as code
    charts = at.get("vega_lite_chart")
    assert len(charts) >= 6  # latency, throughput, batch, KV, cache, 4 GPU panels (some may be empty)


def _chart_titles(at: AppTest) -> str:
    return " ".join(str(c.proto.spec) for c in at.get("vega_lite_chart"))


def _relaunched(app_env, sid: int, server_args: dict, series: dict[str, float], source: str = "metrics") -> AppTest:
    """The Server page of `sid` after a new ready launch with `server_args` and 40 samples of each
    of `series` (metric -> value) over the last 500 s."""
    import time

    import streamlit as st

    from storage import repo
    from storage.db import make_engine

    engine = make_engine(app_env["PITWALL_DATABASE_URL"])
    now = time.time()
    repo.create_launch(engine, server_id=sid, profile_name="p", engine_version="0.5.23",
                       server_args={"model_path": "tiny", **server_args},
                       argv=["python", "-m", "sglang.launch_server"], status="ready", started_at=now - 600,
                       ready_at=now - 590)
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=[{"ts": now - 500 + 10 * i, "server_id": sid, "launch_id": None,
                                         "source": source, "metric": k, "value": v}
                                        for i in range(40) for k, v in series.items()])
    engine.dispose()
    st.cache_data.clear()  # the page's reads are cached for seconds, across AppTest runs in one process
    at = _run("dashboard/pages/server.py", server="alpha", window="1h")
    _no_exception(at)
    return at


def test_a_speculating_server_gets_its_accept_length_chart(seeded, app_env):
    """The Speculation panel is offered only where the launch speculates (its server args)."""
    assert "Speculative decoding" not in _chart_titles(_run("dashboard/pages/server.py", server="alpha", window="1h"))
    at = _relaunched(app_env, seeded["alpha"], {"speculative_algorithm": "EAGLE3", "speculative_num_draft_tokens": 4},
                     {"log.accept_len": 2.4}, source="log")
    assert "Speculative decoding: tokens a step" in _chart_titles(at) and "accept length" in _chart_titles(at)


def test_a_server_scheduling_by_priority_gets_its_queues_per_priority(seeded, app_env):
    """The Priority panel is offered only where the launch schedules by priority, a series per
    priority and state, the priorities read from what is stored."""
    assert "Running and queued by priority" not in _chart_titles(_run("dashboard/pages/server.py", server="alpha",
                                                                      window="1h"))
    at = _relaunched(app_env, seeded["alpha"], {"enable_priority_scheduling": True},
                     {f"metrics.{gauge}_by_priority.{p}": 2.0 for gauge in ("num_running_reqs", "num_queue_reqs")
                      for p in ("1", "10")})
    titles = _chart_titles(at)
    assert "Running and queued by priority" in titles
    assert "queued, priority 10" in titles and "running, priority 1" in titles


def test_a_server_with_hicache_gets_its_tiers_and_host_pool(seeded, app_env):
    """The HiCache pill, offered only where the launch enables it, draws hits by tier and the
    host pool."""
    at = _relaunched(app_env, seeded["alpha"], {"enable_hierarchical_cache": True},
                     {"metrics.cache_hit_tokens_per_s.device": 900.0, "metrics.cache_hit_tokens_per_s.host": 300.0,
                      "metrics.hicache_host_used_tokens": 5000.0, "metrics.hicache_host_total_tokens": 6000.0})
    titles = _chart_titles(at)
    assert "HiCache: prefix hits by tier" in titles and "hits from host memory" in titles
    assert "HiCache host pool" in titles and "capacity" in titles


def test_server_page_for_a_down_server_says_so(seeded):
    at = _run("dashboard/pages/server.py", server="beta", window="1h")
    _no_exception(at)
    assert "down" in _all_text(at)


def test_server_picker_follows_the_url(seeded):
    at = _run("dashboard/pages/server.py", server="beta")
    assert at.sidebar.selectbox(key="sb_server").value == "beta"
    at.sidebar.selectbox(key="sb_server").set_value("alpha").run()
    assert at.query_params["server"] == ["alpha"] or at.query_params["server"] == "alpha"
    assert at.title[0].value == "alpha"


def test_events_render_raw_excerpt_literally(seeded):
    at = _run("dashboard/pages/events.py", window="6h")
    _no_exception(at)
    assert at.code and at.code[0].value == HOSTILE
    for md in at.markdown:  # never interpreted as markdown/HTML
        assert "<script>" not in md.value
    assert at.dataframe, "the events table is shown"


def test_events_filter_by_kind_and_server(seeded):
    at = _run("dashboard/pages/events.py", window="6h")
    at.toggle(key="ev_all").set_value(True).run()
    at.multiselect(key="ev_kinds").set_value(["health_down"]).run()
    df = at.dataframe[0].value
    assert list(df["kind"]) == ["health_down"]
    at.multiselect(key="ev_kinds").set_value([]).run()
    at.toggle(key="ev_all").set_value(False).run()
    at.sidebar.selectbox(key="sb_server").set_value("alpha").run()
    df = at.dataframe[0].value
    assert set(df["server"]) == {"alpha"} and len(df) == 2


def test_events_follow_the_sidebar_server_and_offer_every_kind(seeded):
    """The sidebar's server is the page's filter (one source of truth; never "All servers"
    while the sidebar says beta) and "All servers" widens it.
    The kinds offered are the one table of event kinds: relaunch, collector and alert kinds too."""
    from storage.kinds import EVENT_KINDS

    at = _run("dashboard/pages/events.py", server="beta", window="6h")
    _no_exception(at)
    assert at.sidebar.selectbox(key="sb_server").value == "beta"
    assert set(at.dataframe[0].value["server"]) == {"beta"}
    assert any("events of beta" in c.value for c in at.caption)
    at.toggle(key="ev_all").set_value(True).run()
    assert {"alpha", "beta"} <= set(at.dataframe[0].value["server"])
    offered = set(at.multiselect(key="ev_kinds").options)
    assert offered == set(EVENT_KINDS)
    assert {"relaunch_started", "relaunch_done", "relaunch_failed", "rollback", "collector_error",
            "alert_dropped"} <= offered


def test_benchmarks_shows_runs_trust_flag_and_curves(seeded):
    at = _run("dashboard/pages/benchmarks.py", server="alpha", window="6h")
    _no_exception(at)
    runs = at.dataframe[0].value
    assert list(runs["trusted"]) == ["no (c=4)"]  # a short mark naming the untrusted level
    assert len(at.get("vega_lite_chart")) == 3  # latency, throughput, trade-off
    # one note for the run, in words, naming the level and the measured cause against its bound
    notes = [w.value for w in at.warning if "Not trusted" in w.value]
    assert notes == ["Not trusted: 1 of 2 levels (c=4). The probe client used up to 85 % of one core "
                     "(over 70 %), so it was overloaded and queued its own work. Read their figures "
                     "as upper bounds, or run those levels again on a quieter client."], notes
    levels = at.dataframe[1].value
    assert list(levels["trusted"]) == ["yes", "no: CPU"]


def test_benchmarks_start_sweep_records_run_and_intent(seeded, app_env):
    from storage import repo
    from storage.db import make_engine

    at = _run("dashboard/pages/benchmarks.py", server="alpha")
    at.text_input(key="bm_levels").set_value("1,2")
    at.number_input(key="bm_requests").set_value(5)
    at.button[0].click()  # the form's submit button opens the confirmation dialog
    at.run()
    at.button(key="bm_confirm").click().run()
    _no_exception(at)
    engine = make_engine(app_env["PITWALL_DATABASE_URL"])
    intents = repo.list_intents(engine, kinds=["probe"])
    assert len(intents) == 1 and intents[0].state == "pending"
    run = repo.get_probe_run(engine, run_id=intents[0].payload["run_id"])
    assert run.spec["levels"] == [1.0, 2.0] and run.spec["requests"] == 5
    assert "waiting for the runner" in _all_text(at)
    # the runner's probe lane moves it on; the page follows without a click
    repo.update_intent(engine, intent_id=intents[0].id, state="running")
    repo.update_probe_run(engine, run_id=run.id, status="running", progress=0.5)
    at.run()
    bars = [el.proto.text for el in at.get("progress")]
    assert any("running, 50%" in b for b in bars), bars


def test_benchmarks_bad_levels_are_one_sentence(seeded):
    at = _run("dashboard/pages/benchmarks.py", server="alpha")
    at.text_input(key="bm_levels").set_value("1,four")
    at.button[0].click()
    at.run()
    assert any("whole numbers" in e.value for e in at.error)


def test_about_page_reports_runner_and_tables(seeded):
    at = _run("dashboard/pages/about.py")
    text = _all_text(at)
    assert "not running" in text
    assert at.dataframe
    assert "Retention" in [h.value for h in at.subheader]
    frames = [d.value for d in at.dataframe if "removed next" in d.value.columns]
    assert frames and {"sample", "rollup", "proberun"} <= set(frames[0]["table"])


def test_a_broken_database_shows_a_sentence_not_a_traceback(seeded, app_env, monkeypatch):
    from dashboard.services.views import overview

    def boom(*a, **k):
        raise RuntimeError("kaput")

    monkeypatch.setattr(overview, "server_cards", boom)
    at = _run()
    assert not at.exception
    assert any("internal error" in e.value for e in at.error)


def test_events_raw_pick_survives_a_filter_that_hides_it(seeded):
    at = _run("dashboard/pages/events.py", window="6h")
    at.toggle(key="ev_all").set_value(True).run()  # alpha's oom has the excerpt, beta's health_down not
    assert at.selectbox(key="ev_raw_pick").value is not None
    at.multiselect(key="ev_kinds").set_value(["health_down"]).run()  # no raw excerpt among these
    _no_exception(at)
    assert any("None of these events carries a raw log excerpt" in c.value for c in at.caption)
    at.multiselect(key="ev_kinds").set_value([]).run()
    _no_exception(at)
    assert at.code[0].value == HOSTILE
