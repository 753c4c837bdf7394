"""`streamlit run app.py` alone starts a runner when none holds the database (and only then)."""

from __future__ import annotations

import os
import signal
import time

import pytest
from pwtest import REPO
from streamlit.testing.v1 import AppTest

from dashboard.services.views.health import runner_alive
from storage import repo
from storage.db import make_engine

pytestmark = pytest.mark.integration  # streamlit starts a real `pitwall collect`


def _lease(engine):
    """This machine's runner's host lease (runner.host defaults to the host name)."""
    import socket

    return repo.get_lease(engine, scope=repo.host_scope(socket.gethostname()))


def test_app_starts_a_runner_when_none_is_alive(data_env, monkeypatch):
    monkeypatch.delenv("PITWALL_MANAGED_RUNNER", raising=False)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    engine = make_engine(data_env["PITWALL_DATABASE_URL"])
    assert not runner_alive(engine)
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=30)
    at.run()
    assert not at.exception
    try:
        deadline = time.monotonic() + 30
        while not runner_alive(engine) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert runner_alive(engine)
        lease = _lease(engine)
        assert lease is not None and lease.pid != os.getpid()
    finally:
        lease = _lease(engine)
        if lease is not None:
            os.kill(lease.pid, signal.SIGTERM)
            deadline = time.monotonic() + 20
            while _lease(engine) is not None and time.monotonic() < deadline:
                time.sleep(0.2)
    assert _lease(engine) is None  # the runner released its lease on SIGTERM
