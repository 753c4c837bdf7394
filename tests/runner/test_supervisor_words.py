"""The supervisor's messages name a launch by its number among its server's launches
("sim launch 2"), never by its row id ("launch #5"), as every other message does."""

from __future__ import annotations

import sys

import pytest

from runner.supervisor import ProcessSupervisor
from storage import repo
from storage.db import make_engine


@pytest.fixture
def engine(data_env):
    eng = make_engine(data_env["PITWALL_DATABASE_URL"])
    yield eng
    eng.dispose()


def _launches(engine):  # type: ignore[no-untyped-def]
    other = repo.upsert_server(engine, name="other", base_url="http://127.0.0.1:9", managed=True, python=sys.executable)
    sim = repo.upsert_server(engine, name="sim", base_url="http://127.0.0.1:8", managed=True, python=sys.executable)
    for _ in range(3):  # row ids 1-3 belong to another server, so sim's launch 2 is row 5
        repo.create_launch(engine, server_id=other.id, profile_name="x", argv=["x"], env={}, pid=None,
                           status="stopped", started_at=1.0, ended_at=2.0)
    first, second = (repo.create_launch(engine, server_id=sim.id, profile_name="x", argv=["x"], env={}, pid=None,
                                        status="starting", started_at=3.0) for _ in range(2))
    return sim, first, second


def test_interrupted_and_replaced_messages_use_the_per_server_launch_number(engine) -> None:
    sim, first, second = _launches(engine)
    assert second.id == 5
    sup = ProcessSupervisor(engine, planner=lambda *a: None, auto_start=False)  # type: ignore[arg-type]
    intent = repo.create_intent(engine, kind="relaunch", server_id=sim.id, payload={"profile": "x"}, requested_by="t")
    sup._interrupted_failed(intent, second.id, "its process was gone")
    message = repo.get_intent(engine, intent_id=intent.id).message or ""
    assert "sim launch 2 was starting" in message and "#" not in message
    sup._close_replaced(sim.id, second.id)
    reason = repo.get_launch(engine, launch_id=first.id).end_reason or ""
    assert reason.startswith("replaced by sim launch 2;") and "#" not in reason
