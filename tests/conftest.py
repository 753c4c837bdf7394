"""Shared fixtures: an isolated data dir and database per test, free ports, repo paths."""

from __future__ import annotations

import pytest
from pwtest import PY, REPO, free_port, run_order, subprocess_env, test_group  # noqa: F401  (re-exported for fixtures)
from streamlit import config as _st_config

# AppTest starts from Streamlit's defaults, not .streamlit/config.toml: give it the loopback
# address the committed config sets (an unset address counts as exposed, see components/auth.py).
_st_config.set_option("server.address", "127.0.0.1")


# `make test` runs the suite on several pytest-xdist workers, each taking whole groups of tests
# (pwtest.test_group: a file, or one of the browser or real-SGLang groups), the long groups first
# (pwtest.RUN_FIRST): the items are put in that order here, the same on every worker, and the
# scheduler hands groups out in item order.
def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    items.sort(key=lambda item: run_order(item.nodeid))  # stable: file order inside a group


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):  # type: ignore[no-untyped-def]
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        """xdist's scope scheduler with test_group as the scope, handing groups out in item order
        (xdist would reorder them by test count, which says nothing of how long they take)."""

        def __init__(self, config, log=None):  # type: ignore[no-untyped-def]
            super().__init__(config, log)
            config.option.loadscopereorder = False

        def _split_scope(self, nodeid: str) -> str:
            return test_group(nodeid)

    return GroupScheduling(config, log)


@pytest.fixture
def data_env(tmp_path, monkeypatch) -> dict[str, str]:
    """PITWALL_* variables pointing at a fresh data dir; applied to os.environ too."""
    env = {
        "PITWALL_DATA_DIR": str(tmp_path / "data"),
        "PITWALL_DATABASE_URL": f"sqlite:///{tmp_path / 'data' / 'pitwall.db'}",
        "PITWALL_CONFIG": "",
        "PITWALL_DEMO": "off",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(tmp_path)
    return env


@pytest.fixture
def app_env(data_env, monkeypatch):
    """data_env for AppTest pages: no runner is started, and Streamlit's caches start empty."""
    import streamlit as st

    monkeypatch.setenv("PITWALL_MANAGED_RUNNER", "1")  # never start a runner from a test
    st.cache_data.clear()
    st.cache_resource.clear()
    yield data_env
    st.cache_data.clear()
    st.cache_resource.clear()


@pytest.fixture
def engine(tmp_path):
    from storage.db import make_engine

    eng = make_engine(f"sqlite:///{tmp_path / 'pitwall.db'}")
    yield eng
    eng.dispose()



#: seconds a fanned-out poll waits for a HEALTHY read in tests: a loaded 2-core CI host meets it
HEALTHY_POLL_WAIT_S = 20.0


@pytest.fixture
def patient_polls(monkeypatch) -> float:
    """The fan-out collectors' poll wait (their WAIT_S, 2 s in production) raised to
    HEALTHY_POLL_WAIT_S, for tests that need a healthy read handed in by the poll that started
    it: on a loaded host a 2-s wait can end first, and the read is then (rightly) handed in by a
    later poll the test never makes. A test of a stuck server keeps its own short per-read
    deadline; a poll waits for a read no longer than that read's deadline."""
    from collectors import api_poll, canary, prometheus_source, promscrape

    for module in (api_poll, promscrape, canary, prometheus_source):
        monkeypatch.setattr(module, "WAIT_S", HEALTHY_POLL_WAIT_S)
    return HEALTHY_POLL_WAIT_S
