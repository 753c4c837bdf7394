"""A disaggregated service end to end, against the simulator: a prefill server whose KV link is
slow (SGLANG_SIM_FAULT slow-transfer), a decode server and the router, each a managed server of
one `service` under its own profile, driven by a real Runner (supervisor, /metrics and HTTP API
collectors over real HTTP on 127.0.0.1). The service's card shows the slow link as KV transfer
time, not as decode ITL; the Doctor on the prefill server names it; a relaunch of the decode
role leaves the prefill role up (the same launch, healthy after) and the service serves again."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx
import pytest
from pwtest import runner_thread, wait_for

from cli.wiring import runner_parts
from collectors.sglang.api import SGLangApiCollector
from collectors.sglang.metrics import SGLangMetricsCollector
from config.settings import Settings
from dashboard.services import doctor
from dashboard.services.views.service import service_cards
from launching import launcher
from runner.loop import Runner
from storage import repo
from storage import series_keys as sk

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

SLOW_S = 0.3  # seconds the fault adds to every KV transfer
# real time (speed 1): the handshake's loopback HTTP and a busy host's lag count as what they are,
# never 50-fold as at a faster model clock, so the transfer's share of TTFT is the fault's
ENV = 'SGLANG_SIM_SPEED = "1"\nSGLANG_SIM_STARTUP_S = "0.5"\nSGLANG_SIM_SEED = "1"\n'


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _profiles(folder: Path, ports: dict[str, int]) -> None:
    boot = f"disaggregation-bootstrap-port = {ports['boot']}\n"
    head = 'model_path = "Qwen/Qwen2.5-7B-Instruct"\nentrypoint = "simulator.launch_server"\n[flags]\nenable-metrics = true\n'
    (folder / "prefill.toml").write_text(f'name = "prefill"\n{head}disaggregation-mode = "prefill"\n{boot}'
                                         f'[env]\n{ENV}SGLANG_SIM_FAULT = "slow-transfer={SLOW_S}"\n')
    (folder / "decode.toml").write_text(f'name = "decode"\n{head}disaggregation-mode = "decode"\n{boot}'
                                        f"decode-log-interval = 5\n[env]\n{ENV}")
    (folder / "router.toml").write_text(
        'name = "router"\nmodel_path = "Qwen/Qwen2.5-7B-Instruct"\nentrypoint = "simulator.launch_router"\n[flags]\n'
        f'pd-disaggregation = true\nprefill = "http://127.0.0.1:{ports["prefill"]}"\n'
        f'decode = "http://127.0.0.1:{ports["decode"]}"\nprometheus-host = "127.0.0.1"\n'
        f'prometheus-port = {ports["metrics"]}\nhealth-check-interval-secs = 1\n')


def _ready(engine, sid: int):  # type: ignore[no-untyped-def]
    launch = repo.latest_launch(engine, server_id=sid)
    return launch if launch is not None and launch.status == "ready" and launch.ended_at is None else None


def _traffic(router: int, n: int) -> None:
    for _ in range(n):
        r = httpx.post(f"http://127.0.0.1:{router}/generate", timeout=60,
                       json={"text": "a prompt for the disaggregated service " * 6, "sampling_params": {"max_new_tokens": 16}})
        r.raise_for_status()
        time.sleep(0.1)  # spread over several scrapes: each window sees a few requests


def test_a_slow_kv_link_shows_as_transfer_time_and_a_decode_relaunch_leaves_prefill_up(tmp_path: Path, engine) -> None:
    folder = tmp_path / "profiles"
    folder.mkdir()
    ports = {k: free_port() for k in ("prefill", "decode", "router", "metrics", "boot")}
    _profiles(folder, ports)
    (tmp_path / "data" / "logs").mkdir(parents=True)
    settings = Settings(data_dir=tmp_path / "data", database_url="sqlite://", profiles_dir=folder)
    ids = {}
    for role in ("prefill", "decode", "router"):
        ids[role] = repo.upsert_server(
            engine, name=role, base_url=f"http://127.0.0.1:{ports[role]}", managed=True, python=sys.executable,
            profile=role, log_path=str(tmp_path / "data" / "logs" / f"{role}.log"), service="chat", role=role,
            gpu_indices=None if role == "router" else [0], gpu_hourly_usd=None if role == "router" else 3.6,
            metrics_url=f"http://127.0.0.1:{ports['metrics']}/metrics" if role == "router" else None).id
    metrics, api = SGLangMetricsCollector(interval_s=0.3), SGLangApiCollector(interval_s=0.5)
    supervisor, handlers = runner_parts(settings, engine)
    runner = Runner(engine, [metrics, api], supervisor=supervisor, intent_handlers=handlers, tick_s=0.05, flush_s=0.2)
    with runner_thread(runner):
        for role in ("prefill", "decode", "router"):
            wait_for(lambda r=role: _ready(engine, ids[r]), 120, what=f"the {role} server ready")
        wait_for(lambda: httpx.get(f"http://127.0.0.1:{ports['router']}/readiness", timeout=2).status_code == 200,
                 60, what="the router sees both workers")
        t0 = time.time()
        _traffic(ports["router"], 12)
        wait_for(lambda: (c := service_cards(engine)) and c[0].figures["kv_transfer_p50_s"] is not None and c[0],
                 60, what="the service card's transfer figures")
        time.sleep(1.0)  # the scrapes after the last request
        [card] = service_cards(engine)
        ev = doctor.gather(engine, "prefill", since=t0, until=time.time())
        findings = {f.rule: f for f in doctor.diagnose(ev)} if ev is not None else {}
        prefill_launch = _ready(engine, ids["prefill"])
        intent = launcher.request(engine, kind="relaunch", server_name="decode", actor="tester", profile="decode")
        done = wait_for(lambda: (i := repo.get_intent(engine, intent_id=intent.id)) is not None
                        and i.state in launcher.FINAL_STATES and i, 120, what="the decode relaunch")
        after = _ready(engine, ids["prefill"])
        health = repo.sample_values(engine, server_id=ids["prefill"], metric=sk.API_HEALTH_OK, since=time.time() - 5)
        wait_for(lambda: httpx.get(f"http://127.0.0.1:{ports['router']}/readiness", timeout=2).status_code == 200,
                 60, what="the router sees the new decode server")
        _traffic(ports["router"], 2)  # the service serves again
    assert card.figures["kv_transfer_p50_s"] >= SLOW_S  # model seconds: the fault's 0.3 s a transfer
    parts = {p.name: p.seconds for p in card.ttft_parts if p.seconds is not None and p.name != "other"}
    assert max(parts, key=lambda k: parts[k]) == "KV transfer", parts  # the largest part, by far
    assert card.transfer_share is not None and card.transfer_share > 0.25  # the Doctor's own threshold
    assert card.figures["itl_p99_s"] is not None and card.figures["itl_p99_s"] < 0.1  # decode steps unchanged
    assert "pd_transfer_slow" in findings, [f.rule for f in findings.values()]
    [prefill] = [m for m in card.members if m.role == "prefill"]
    assert any(t == "KV transfer from prefill to decode is slow" for t, _ in prefill.findings)  # on the card too
    assert "the KV transfer takes" in findings["pd_transfer_slow"].evidence
    assert done.state == "done", done.message
    assert prefill_launch is not None and after is not None and after.id == prefill_launch.id  # prefill never restarted
    assert health.size and health[-1] == 1.0  # and answers /health after the decode relaunch
    # (one /health read missing its deadline on a busy host is no restart: the launch id above says it)
