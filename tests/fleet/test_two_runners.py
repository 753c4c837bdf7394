"""Two real `pitwall collect` processes (runner.host host-a and host-b) on one real PostgreSQL.

Each runner has its own pitwall.toml (PITWALL_CONFIG) with one managed simulator server
(`simulator.launch_server` through a fast profile: SGLANG_SIM_SPEED / SGLANG_SIM_STARTUP_S); host-b
also watches host-a's server under another name. Checked: each runner launches only its own
server (the Launch's pid is a child of that runner's process), both collect, neither retires the
other's servers, an intent for host-b is carried out by host-b only (and never by host-a while
host-b is down: it waits, then expires), exactly one runner keeps house (the `db` lease) and the
other takes it over when the first is killed, with runner_lost / runner_back events.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import sqlalchemy
from pwtest import PY, REPO, free_port, sim_profile, stop_group, subprocess_env, wait_for

from launching import launcher
from storage import repo
from storage.db import make_engine

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

FAST_ENV = {"SGLANG_SIM_SPEED": "50", "SGLANG_SIM_STARTUP_S": "0.5", "SGLANG_SIM_SEED": "1"}
TTL_S = 15  # runner.lease_ttl_s (the default): a busy machine may renew late; no test waits on it
EXPIRY_S = 20  # runner.intent_expiry_s: long enough for a busy host-b to claim its relaunch


class Fleet:
    """Starts and stops the runners of one test; cleans up whatever they launched."""

    def __init__(self, tmp_path: Path, db_url: str) -> None:
        self.tmp, self.db_url = tmp_path, db_url
        self.profiles = tmp_path / "profiles"
        self.profiles.mkdir()
        sim_profile(self.profiles, "fast", "max-running-requests = 8", FAST_ENV)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.engine = make_engine(db_url)

    def config(self, host: str, servers: str = "") -> Path:
        path = self.tmp / f"{host}.toml"
        path.write_text(f"[runner]\nlease_ttl_s = {TTL_S}\nintent_expiry_s = {EXPIRY_S}\n{servers}")
        return path

    def start(self, host: str, config: Path) -> subprocess.Popen[bytes]:
        data = self.tmp / f"data-{host}"
        env = subprocess_env({
            "PITWALL_RUNNER_HOST": host, "PITWALL_CONFIG": str(config), "PITWALL_DEMO": "off",
            "PITWALL_DATA_DIR": str(data), "PITWALL_DATABASE_URL": self.db_url,
            "PITWALL_PROFILES_DIR": str(self.profiles), "PITWALL_CANARY_INTERVAL_S": "0",
        })
        log = open(self.tmp / f"collect-{host}.log", "ab")  # noqa: SIM115 - the child keeps it
        proc = subprocess.Popen([PY, "-m", "cli", "collect"], cwd=REPO, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.procs[host] = proc
        wait_for(lambda: self.lease(host) is not None and self.lease(host).pid == proc.pid,
                 60, f"the runner of {host} to take its host lease ({self.log(host)[-400:]})")
        return proc

    def log(self, host: str) -> str:
        path = self.tmp / f"collect-{host}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def lease(self, scope_host: str):  # type: ignore[no-untyped-def]
        return repo.get_lease(self.engine, scope=repo.host_scope(scope_host))

    def db_holder_pid(self) -> int | None:
        """Pid named by the `db` lease row (no age check: a late heartbeat on a busy machine is
        not a takeover; a takeover rewrites the row and bumps its generation)."""
        lease = repo.get_lease(self.engine, scope=repo.DB_SCOPE)
        return lease.pid if lease is not None else None

    def db_generation(self) -> int | None:
        lease = repo.get_lease(self.engine, scope=repo.DB_SCOPE)
        return lease.generation if lease is not None else None

    def beats(self, host: str, n: int) -> None:
        """Wait until `host`'s runner has renewed its host lease `n` more times (each renew
        beat also tries the `db` lease)."""
        seen = [self.lease(host).heartbeat_at]

        def moved() -> bool:
            now = self.lease(host).heartbeat_at
            if now != seen[-1]:
                seen.append(now)
            return len(seen) > n

        wait_for(moved, 60, f"{n} renew beats of {host}", poll_s=0.2)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                stop_group(proc)
        for launch in repo.list_launches(self.engine):  # a SIGKILLed runner's server outlives it
            if launch.pid and launch.ended_at is None and psutil.pid_exists(launch.pid):
                try:
                    os.killpg(launch.pid, signal.SIGKILL)
                except OSError:
                    pass
        self.engine.dispose()


@pytest.fixture
def fleet(tmp_path: Path, fleet_db: str) -> Iterator[Fleet]:
    f = Fleet(tmp_path, fleet_db)
    try:
        yield f
    finally:
        f.close()


def _managed(name: str, port: int) -> str:
    return (f'[[servers]]\nname = "{name}"\nbase_url = "http://127.0.0.1:{port}"\nmanaged = true\n'
            f'profile = "fast"\npython = "{sys.executable}"\n')


def _ready(engine, name: str):  # type: ignore[no-untyped-def]
    server = repo.get_server(engine, name=name)
    launch = repo.latest_launch(engine, server_id=server.id) if server is not None else None
    # ready once its launch row is, and the intent that started it is closed (a moment later)
    settled = launch is not None and launch.status == "ready" and launcher.pending_control(engine, server.id) is None
    return launch if settled else None


def _child_of(pid: int, runner_pid: int) -> bool:
    return runner_pid in [p.pid for p in psutil.Process(pid).parents()]


def _sample_count(engine, name: str) -> int:  # type: ignore[no-untyped-def]
    server = repo.get_server(engine, name=name)
    with engine.connect() as conn:
        return int(conn.execute(sqlalchemy.text("SELECT COUNT(*) FROM sample WHERE server_id = :s"),
                                {"s": server.id}).scalar() or 0)


def test_two_runners_own_their_servers_and_intents(fleet: Fleet) -> None:
    port_a, port_b = free_port(), free_port()
    a = fleet.start("host-a", fleet.config("host-a", _managed("sim-a", port_a)))
    watched = f'[[servers]]\nname = "watched-b"\nbase_url = "http://127.0.0.1:{port_a}"\n'
    b = fleet.start("host-b", fleet.config("host-b", _managed("sim-b", port_b) + watched))
    eng = fleet.engine
    launch_a = wait_for(lambda: _ready(eng, "sim-a"), 90, "sim-a ready")
    launch_b = wait_for(lambda: _ready(eng, "sim-b"), 90, "sim-b ready")
    assert _child_of(launch_a.pid, a.pid) and not _child_of(launch_a.pid, b.pid)
    assert _child_of(launch_b.pid, b.pid) and not _child_of(launch_b.pid, a.pid)
    owners = {s.name: s.host for s in repo.list_servers(eng)}
    assert owners == {"sim-a": "host-a", "sim-b": "host-b", "watched-b": "host-b"}  # nobody retired
    for name in ("sim-a", "sim-b", "watched-b"):
        wait_for(lambda n=name: _sample_count(eng, n) > 0, 60, f"samples of {name}")
    assert fleet.db_holder_pid() == a.pid  # the first runner keeps house; host-b only tries
    house = fleet.db_generation()

    # an intent for host-b's server is carried out by host-b
    relaunch = launcher.request(eng, kind="relaunch", server_name="sim-b", actor="test")
    assert relaunch.host == "host-b"
    wait_for(lambda: repo.get_intent(eng, intent_id=relaunch.id).state == "done", 90, "the relaunch of sim-b")
    again = _ready(eng, "sim-b")
    assert again is not None and again.id != launch_b.id and _child_of(again.pid, b.pid)

    # host-b stops (SIGTERM: it stops its server and releases its leases); a new intent for its
    # server waits for it and expires, never claimed by host-a, which keeps collecting
    stop_group(b)
    assert b.returncode == 0, fleet.log("host-b")[-2000:]
    assert fleet.lease("host-b") is None
    stopped_at = time.time()
    stop = launcher.request(eng, kind="stop", server_name="sim-b", actor="test")
    seen = set()

    def settled() -> bool:
        state = repo.get_intent(eng, intent_id=stop.id).state
        seen.add(state)
        return state != "pending"

    wait_for(settled, EXPIRY_S + 60, "the stop for host-b to expire", poll_s=0.2)
    assert seen <= {"pending", "expired"} and "expired" in seen  # never running, never done
    sim_b = repo.get_server(eng, name="sim-b")
    events = repo.list_events(eng, server_id=sim_b.id, kinds=["intent_expired"])
    assert len(events) == 1 and f"stop R-{stop.id}" in events.iloc[0]["message"]
    assert a.poll() is None and fleet.db_holder_pid() == a.pid and fleet.db_generation() == house
    sim_a = repo.get_server(eng, name="sim-a")
    wait_for(lambda: (repo.latest_samples(eng, server_id=sim_a.id, metrics=["api.health_ok"]).get("api.health_ok")
                      or (0.0, 0.0))[0] > stopped_at, 60, "host-a to keep collecting")
    assert _ready(eng, "sim-a") is not None and _ready(eng, "sim-a").id == launch_a.id


def test_one_runner_keeps_house_and_the_other_takes_over_when_it_dies(fleet: Fleet) -> None:
    a = fleet.start("host-a", fleet.config("host-a"))
    b = fleet.start("host-b", fleet.config("host-b"))
    eng = fleet.engine
    assert fleet.db_holder_pid() == a.pid
    house = fleet.db_generation()
    fleet.beats("host-b", 2)  # host-b tried twice and did not take `db`
    assert fleet.db_holder_pid() == a.pid and fleet.db_generation() == house
    for host in ("host-a", "host-b"):  # each runner's own figures, apart (source self:<host>)
        wait_for(lambda h=host: repo.latest_samples(eng, server_id=0, metrics=["self.cpu_pct"], source=f"self:{h}"),
                 30, f"self samples of {host}")

    a.send_signal(signal.SIGKILL)  # no release: host-b must notice the dead holder
    a.wait(10)
    wait_for(lambda: fleet.db_holder_pid() == b.pid, TTL_S + 30, "host-b to take the db lease over")
    wait_for(lambda: len(repo.list_events(eng, kinds=["runner_lost"])) == 1, TTL_S + 30,
             "a runner_lost event for host-a", poll_s=0.2)
    lost = repo.list_events(eng, kinds=["runner_lost"]).iloc[0]["message"]
    assert "host-a" in lost and "host-b" not in lost

    a2 = fleet.start("host-a", fleet.config("host-a"))  # host-a's runner comes back
    wait_for(lambda: len(repo.list_events(eng, kinds=["runner_back"])) == 1, 30, "a runner_back event")
    assert fleet.db_holder_pid() == b.pid and a2.poll() is None  # house stays with host-b
    assert len(repo.list_events(eng, kinds=["runner_lost"])) == 1
