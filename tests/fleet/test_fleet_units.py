"""Fleet units on SQLite: lease scopes, host-scoped intents, server ownership, runner_lost.

The end-to-end behaviour (two real `pitwall collect` processes on one PostgreSQL) is in
test_two_runners.py; these pin the rules each piece enforces.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from config.settings import ServerConfig, Settings
from dashboard.services.views import health, session
from dashboard.services.views.servers import ServerOwnershipError, sync_servers
from runner import fleet
from runner.lease import Lease, LeaseHeld
from storage import repo


def _server(engine, name: str, host: str | None):  # type: ignore[no-untyped-def]
    return repo.upsert_server(engine, name=name, base_url="http://127.0.0.1:1", host=host)


def test_each_host_has_its_own_lease_and_one_runner_keeps_house(engine):
    a, b = Lease(engine, "m:1", host="host-a"), Lease(engine, "m:2", host="host-b")
    a.acquire()
    b.acquire()
    assert a.held() and b.held()
    assert a.holds_db and not b.holds_db  # the first one takes `db`; the second only tries
    assert b.renew() and not b.holds_db
    scopes = {x.scope: x.holder for x in repo.list_leases(engine)}
    assert scopes == {"db": "m:1", "host:host-a": "m:1", "host:host-b": "m:2"}
    assert [x.scope for x in repo.list_leases(engine)][0] == "db"
    a.release()  # a clean stop gives `db` up: the other takes it at its next beat
    assert b.renew() and b.holds_db
    assert repo.get_lease(engine, scope="host:host-a") is None


def test_two_runners_on_one_machine_and_pid_keep_their_own_names(engine):
    """Containers sharing a hostname can share a pid: default holder names still differ, so
    the second runner never re-takes `db` as if it were its own (which would happen every beat)."""
    a, b = Lease(engine, host="host-a"), Lease(engine, host="host-b")
    assert a.holder != b.holder
    a.acquire()
    b.acquire()
    gen = repo.get_lease(engine, scope=repo.DB_SCOPE).generation
    for _ in range(3):
        assert a.renew() and b.renew()
        assert a.holds_db and not b.holds_db
    assert repo.get_lease(engine, scope=repo.DB_SCOPE).generation == gen


def test_a_second_runner_for_the_same_host_is_refused_naming_holder_and_host(engine):
    Lease(engine, "m:111", host="host-a").acquire()
    with pytest.raises(LeaseHeld, match=r"Another runner \(m:111\) is collecting for host host-a"):
        Lease(engine, "m:222", host="host-a").acquire()
    Lease(engine, "m:333", host="host-b").acquire()  # another host is fine


@pytest.mark.integration
def test_runners_racing_for_a_new_scope_on_postgresql_get_one_holder(fleet_db):
    """Both see no `db` row and insert at once: one wins, the other is told who holds it."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from storage.db import make_engine

    engine = make_engine(fleet_db)
    try:
        for scope in ("db", "host:h"):
            start = threading.Barrier(4)  # the four calls leave together: the race is provoked

            def take(i: int, sc: str = scope, go: threading.Barrier = start):  # type: ignore[no-untyped-def]
                go.wait(30)
                return repo.acquire_lease(engine, scope=sc, holder=f"m:{i}", pid=i, host="m", ttl_s=15)

            with ThreadPoolExecutor(4) as pool:
                results = list(pool.map(take, range(4)))
            winners = [lease.holder for ok, lease in results if ok and lease is not None]
            assert len(winners) == 1
            assert all(lease is not None and lease.holder == winners[0] for _, lease in results)
    finally:
        engine.dispose()


def test_a_stale_db_lease_is_taken_over_after_the_ttl_only(engine):
    ok, _ = repo.acquire_lease(engine, scope="db", holder="x:1", pid=1, host="elsewhere", ttl_s=15, now=100.0)
    assert ok
    ok, cur = repo.acquire_lease(engine, scope="db", holder="y:2", pid=2, host="here", ttl_s=15, now=110.0)
    assert not ok and cur is not None and cur.holder == "x:1"
    ok, cur = repo.acquire_lease(engine, scope="db", holder="y:2", pid=2, host="here", ttl_s=15, now=116.0)
    assert ok and cur is not None and cur.generation == 2
    assert not repo.renew_lease(engine, scope="db", holder="x:1", generation=1)  # the old holder lost it
    assert repo.lease_is(engine, scope="db", generation=2)


def test_intents_carry_their_servers_host_and_only_that_host_claims_them(engine):
    a, b, loose = _server(engine, "sa", "host-a"), _server(engine, "sb", "host-b"), _server(engine, "sx", None)
    for_b = repo.create_intent(engine, kind="stop", server_id=b.id)
    for_loose = repo.create_intent(engine, kind="validate", server_id=loose.id)
    no_server = repo.create_intent(engine, kind="validate", server_id=None)
    for_a = repo.create_intent(engine, kind="relaunch", server_id=a.id)
    assert (for_b.host, for_a.host, for_loose.host, no_server.host) == ("host-b", "host-a", None, None)
    la, lb = Lease(engine, "m:1", host="host-a"), Lease(engine, "m:2", host="host-b")
    la.acquire()
    lb.acquire()
    # what a runner's tick reads before it claims: the kinds it may claim, no more
    assert repo.pending_intent_kinds(engine, host="host-a") == {"relaunch"}
    assert repo.pending_intent_kinds(engine, host="host-a", db_generation=la.db_generation) == {"relaunch", "validate"}
    assert repo.pending_intent_kinds(engine, host="host-b") == {"stop"}
    assert repo.pending_intent_kinds(engine) == {"stop", "validate", "relaunch"}
    # A is not `db`-less: pass no db generation -> it claims only its own host's intents
    got = repo.claim_next_intent(engine, host="host-a", generation=la.generation)
    assert got is not None and got.id == for_a.id
    assert repo.claim_next_intent(engine, host="host-a", generation=la.generation) is None
    # B with a stale generation (it lost its lease) claims nothing, even its own
    assert repo.claim_next_intent(engine, host="host-b", generation=(lb.generation or 0) + 1) is None
    got = repo.claim_next_intent(engine, host="host-b", generation=lb.generation, db_generation=99)
    assert got is not None and got.id == for_b.id  # own intent; a wrong db generation fences host-less ones
    assert repo.claim_next_intent(engine, host="host-b", generation=lb.generation, db_generation=99) is None
    # the `db` holder claims the host-less ones
    got = repo.claim_next_intent(engine, host="host-a", generation=la.generation, db_generation=la.db_generation)
    assert got is not None and got.id == for_loose.id
    assert repo.get_intent(engine, intent_id=for_b.id).state == "running"
    assert repo.pending_intent_kinds(engine) == {"validate"}  # running ones are not pending


def test_fail_stale_intents_fails_only_the_scope_it_is_given(engine):
    a, b = _server(engine, "sa", "host-a"), _server(engine, "sb", "host-b")
    ids = [repo.create_intent(engine, kind="stop", server_id=s).id for s in (a.id, b.id, None)]
    for _ in ids:
        repo.claim_next_intent(engine)
    assert repo.fail_stale_intents(engine, reason="gone", scope=repo.host_scope("host-a")) == 1
    states = [repo.get_intent(engine, intent_id=i).state for i in ids]
    assert states == ["failed", "running", "running"]  # host-b's runner is still carrying out its own
    assert repo.fail_stale_intents(engine, reason="gone", scope=repo.DB_SCOPE) == 1
    assert repo.get_intent(engine, intent_id=ids[2]).state == "failed"


def _settings(tmp_path: Path, host: str, servers: list[ServerConfig]) -> Settings:
    return Settings(data_dir=tmp_path, database_url="sqlite://", demo="off", servers=servers,
                    runner={"host": host, "lease_ttl_s": 15.0})


def test_sync_retires_only_this_hosts_servers(engine, tmp_path):
    sync_servers(engine, _settings(tmp_path, "host-a", [ServerConfig("a1", "http://127.0.0.1:1")]))
    sync_servers(engine, _settings(tmp_path, "host-b", [ServerConfig("b1", "http://127.0.0.1:2")]))
    assert {(s.name, s.host) for s in repo.list_servers(engine)} == {("a1", "host-a"), ("b1", "host-b")}
    sync_servers(engine, _settings(tmp_path, "host-a", [ServerConfig("a2", "http://127.0.0.1:3")]))
    assert {s.name for s in repo.list_servers(engine)} == {"a2", "b1"}  # a1 retired, b1 untouched
    assert [s.name for s in repo.list_servers(engine, host="host-b")] == ["b1"]


def test_a_name_another_live_host_owns_is_refused_and_a_dead_ones_taken_only_explicitly(engine, tmp_path):
    sync_servers(engine, _settings(tmp_path, "host-b", [ServerConfig("shared", "http://127.0.0.1:2")]))
    Lease(engine, "m:2", host="host-b").acquire()
    implicit = _settings(tmp_path, "host-a", [ServerConfig("shared", "http://127.0.0.1:1")])
    with pytest.raises(ServerOwnershipError, match="belongs to runner host 'host-b', whose runner is alive"):
        sync_servers(engine, implicit)
    explicit = _settings(tmp_path, "host-a", [ServerConfig("shared", "http://127.0.0.1:1", host="host-a")])
    with pytest.raises(ServerOwnershipError):
        sync_servers(engine, explicit)  # alive: never taken over
    assert repo.get_server(engine, name="shared").host == "host-b"  # nothing written
    repo.release_lease(engine, scope="host:host-b", holder="m:2")  # B's runner stops
    with pytest.raises(ServerOwnershipError, match="is not running.*set host = 'host-a'"):
        sync_servers(engine, implicit)
    sync_servers(engine, explicit)  # the configuration names the host: moved
    assert repo.get_server(engine, name="shared").host == "host-a"


def test_runner_alive_and_status_are_per_host(engine):
    assert not health.runner_alive(engine) and session.runner_status_line(engine)[0] is False
    Lease(engine, "m:1", host="host-a").acquire()
    repo.acquire_lease(engine, scope="host:host-b", holder="m:2", pid=2, host="m", ttl_s=15, now=0.0)  # long dead
    assert health.runner_alive(engine) and health.runner_alive(engine, host="host-a")
    assert not health.runner_alive(engine, host="host-b")
    runners = {r.host: r for r in health.list_runners(engine)}
    assert runners["host-a"].alive and runners["host-a"].housekeeping
    assert not runners["host-b"].alive and not runners["host-b"].housekeeping
    alive, line = session.runner_status_line(engine)
    assert alive and "stopped: host-b" in line


def test_the_db_holder_records_runner_lost_once_and_runner_back(engine):
    _server(engine, "b1", "host-b")
    repo.acquire_lease(engine, scope="host:host-b", holder="m:2", pid=os.getpid(), host="m", ttl_s=15, now=1000.0)
    assert fleet.watch_hosts(engine, ttl_s=15, now=1005.0) == []
    assert fleet.watch_hosts(engine, ttl_s=15, now=1020.0) == ["runner_lost:host-b"]
    assert fleet.watch_hosts(engine, ttl_s=15, now=1030.0) == []  # once, not every pass
    lost = repo.list_events(engine, kinds=["runner_lost"])
    assert len(lost) == 1 and lost.iloc[0]["severity"] == "error"
    assert "host-b" in lost.iloc[0]["message"] and "b1" in lost.iloc[0]["message"]
    repo.renew_lease(engine, scope="host:host-b", holder="m:2", now=1040.0)
    assert fleet.watch_hosts(engine, ttl_s=15, now=1041.0) == ["runner_back:host-b"]
    assert len(repo.list_events(engine, kinds=["runner_back"])) == 1


def test_a_second_host_with_no_servers_is_told_to_turn_the_demo_off(engine, tmp_path):
    demo_a = replace(_settings(tmp_path, "host-a", []), demo="on")
    sync_servers(engine, demo_a)
    Lease(engine, "m:1", host="host-a").acquire()
    demo_b = replace(_settings(tmp_path, "host-b", []), demo="on")
    with pytest.raises(ServerOwnershipError, match='already runs the demo.*demo = "off"'):
        sync_servers(engine, demo_b)
    assert {s.host for s in repo.list_servers(engine)} == {"host-a"}  # nothing moved


def test_two_runners_mirroring_the_same_profile_at_once_both_succeed(engine):
    """Two runners starting together sync the same profiles: the INSERT that loses the race on
    the unique name (made to lose here: the other runner's row lands between read and write)
    updates the winner's row instead of crashing the runner."""
    from sqlalchemy import event, insert
    from sqlmodel import Session

    from storage.models import Profile

    raced = []

    def other_runner_inserts_first(session, _ctx, _instances):  # type: ignore[no-untyped-def]
        if not raced:
            raced.append(True)
            with engine.begin() as conn:
                conn.execute(insert(Profile.__table__).values(name="p", model_path="other", content_hash="h1",
                                                              entrypoint="sglang.launch_server", updated_at=0.0))

    event.listen(Session, "before_flush", other_runner_inserts_first)
    try:
        prof = repo.upsert_profile(engine, name="p", model_path="mine", content_hash="h2")
    finally:
        event.remove(Session, "before_flush", other_runner_inserts_first)
    assert raced
    assert prof.model_path == "mine"
    assert [(p.name, p.model_path) for p in repo.list_profiles(engine)] == [("p", "mine")]


def test_a_server_another_host_inserts_during_our_sync_is_refused_not_taken(engine, tmp_path):
    """Two hosts starting at once both find no row for a name and both insert it: the one that
    loses the INSERT race must not then overwrite the winner's row (and its host) — it is
    refused as any runner that finds another live host's server is."""
    from sqlalchemy import event, insert
    from sqlmodel import Session

    from storage.models import Server

    Lease(engine, "m:2", host="host-b").acquire()  # host-b's runner is alive
    raced = []

    def host_b_inserts_first(session, _ctx, _instances):  # type: ignore[no-untyped-def]
        if not raced:
            raced.append(True)
            with engine.begin() as conn:
                conn.execute(insert(Server.__table__).values(
                    name="shared", base_url="http://127.0.0.1:2", engine="sglang", kind="llm",
                    managed=False, host="host-b", updated_at=0.0))

    event.listen(Session, "before_flush", host_b_inserts_first)
    try:
        with pytest.raises(ServerOwnershipError, match="belongs to runner host 'host-b'"):
            sync_servers(engine, _settings(tmp_path, "host-a", [ServerConfig("shared", "http://127.0.0.1:1")]))
    finally:
        event.remove(Session, "before_flush", host_b_inserts_first)
    assert raced
    row = repo.get_server(engine, name="shared")
    assert (row.host, row.base_url) == ("host-b", "http://127.0.0.1:2")


def test_a_launch_and_the_intent_that_spawned_it_are_recorded_in_one_write(engine):
    """A runner killed right after it spawned a server leaves the launch named in its intent (one
    transaction), so the next runner keeps that intent and judges it by what the server does; a
    launch row without it was failed as 'the runner stopped' while the server came up (CI)."""
    srv = _server(engine, "sa", None)
    intent = repo.create_intent(engine, kind="relaunch", server_id=srv.id, payload={"profile": "p"})
    repo.claim_next_intent(engine)
    repo.update_intent(engine, intent_id=intent.id, result={"replaced_launch_id": 3})
    launch = repo.create_launch(engine, server_id=srv.id, profile_name="p", status="starting", pid=1,
                                for_intent=intent.id, note={"profile": "p", "token": "sk-live-1234567890abcdef"})
    got = repo.get_intent(engine, intent_id=intent.id)
    assert repo.in_flight_launch(got) == launch.id and got.result["replaced_launch_id"] == 3
    assert "sk-live-1234567890abcdef" not in str(got.result)  # the note is redacted like any result
    assert repo.fail_stale_intents(engine, reason="gone", keep_in_flight=True) == 0
    assert repo.get_intent(engine, intent_id=intent.id).state == "running"
