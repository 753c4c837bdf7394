"""The demo's GPUs: the demo settings resolve to the demo servers' dcgm-exporter look-alikes, and
the demo profiles, launched as Pitwall launches them, serve exactly there (GPU 0: the LLM demo's
simulated H200, GPU 1: the image demo's B300), read by the collector the registry builds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pwtest import REPO, free_demo_port

from collectors.base import CollectorContext, CollectorError, ServerTarget
from collectors.registry import build_collectors
from collectors.sglang.launch import build_argv
from config.settings import SettingsError, demo_dcgm_urls, load_settings
from dashboard.services.views.servers import DEMO_IMAGE_SERVER, DEMO_SERVER, configured_servers
from launching.launcher import host_port
from launching.profiles import load_file

DEMO_PROFILES = {"demo": 0, "demo-radix-off": 0, "demo-image": 1, "demo-image-fast": 1}


def _env(tmp_path: Path, port: int, **extra: str) -> dict[str, str]:
    return {"PITWALL_DATA_DIR": str(tmp_path), "PITWALL_DEMO": "auto",
            "PITWALL_DEMO_PORT": str(port), **extra}


def test_demo_settings_read_the_demo_exporters(tmp_path):
    s = load_settings(env=_env(tmp_path, 31000), cwd=tmp_path)
    assert s.gpu["dcgm_url"] == demo_dcgm_urls(31000) == [
        "http://127.0.0.1:31100/metrics", "http://127.0.0.1:31101/metrics"]
    servers = {c.name: c for c in configured_servers(s)}
    assert servers[DEMO_SERVER].gpu_indices == [0] and servers[DEMO_IMAGE_SERVER].gpu_indices == [1]


def test_a_configured_dcgm_url_wins_and_takes_a_list(tmp_path):
    s = load_settings(env=_env(tmp_path, 31000, PITWALL_GPU_DCGM_URL="http://a:9400/metrics, http://b:9400/metrics"),
                      cwd=tmp_path)
    assert s.gpu["dcgm_url"] == ["http://a:9400/metrics", "http://b:9400/metrics"]
    (tmp_path / "pitwall.toml").write_text('[gpu]\ndcgm_url = "http://node1:9400/metrics"\n')
    assert load_settings(env=_env(tmp_path, 31000), cwd=tmp_path).gpu["dcgm_url"] == ["http://node1:9400/metrics"]


def test_no_demo_no_exporters_and_a_bad_url_is_a_clear_error(tmp_path):
    (tmp_path / "pitwall.toml").write_text('[[servers]]\nname = "a"\nbase_url = "http://127.0.0.1:30000"\n')
    assert load_settings(env={}, cwd=tmp_path).gpu["dcgm_url"] == []
    with pytest.raises(SettingsError, match=r"gpu.dcgm_url \(PITWALL_GPU_DCGM_URL\) is 'node1:9400'; expected a URL"):
        load_settings(env={"PITWALL_GPU_DCGM_URL": "node1:9400"}, cwd=tmp_path)


def test_every_demo_profile_sets_its_exporter_beside_its_server():
    from simulator.dcgm import exporter_port, gpu_index_base

    for name, index in DEMO_PROFILES.items():
        env = load_file(REPO / "profiles" / f"{name}.toml").env
        assert gpu_index_base(env) == index, name
        assert exporter_port(30100 + index, env) == 30200 + index, name


@pytest.fixture()
def demo_procs(tmp_path: Path) -> Iterator[tuple[object, list[subprocess.Popen[bytes]]]]:
    settings = load_settings(env=_env(tmp_path, free_demo_port()), cwd=tmp_path)
    procs = []
    for cfg in configured_servers(settings):
        spec = load_file(REPO / "profiles" / f"{cfg.profile}.toml")
        host, port = host_port(cfg.base_url)
        argv = build_argv(sys.executable, spec.entrypoint, spec.model_path, host, port, spec.flags)
        log = open(tmp_path / f"{cfg.name}.log", "wb")  # noqa: SIM115 - closed right after start
        procs.append(subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                      env={**os.environ, **spec.env, "PYTHONPATH": str(REPO)}))
        log.close()
    yield settings, procs
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)


@pytest.mark.integration
def test_demo_profiles_serve_the_exporters_the_settings_read(demo_procs):
    settings, procs = demo_procs
    [gpu], errors = build_collectors({}, names={"gpu"}, gpu=settings.gpu)
    assert not errors
    servers = [ServerTarget(id=i + 1, name=c.name, base_url=c.base_url, gpu_indices=c.gpu_indices)
               for i, c in enumerate(configured_servers(settings))]
    ctx = CollectorContext(servers=servers, load_state=lambda k: None, save_state=lambda k, v: None,
                           now=lambda: 1.0)
    by_server: dict[int, set[str]] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the exporters answer from process start, before weights load
        assert all(p.poll() is None for p in procs)
        try:
            result = gpu.poll(ctx)
        except CollectorError:  # neither exporter answers yet
            time.sleep(0.5)
            continue
        by_server = {}
        for s in result.samples:
            by_server.setdefault(s.server_id, set()).add(s.metric)
        if len(by_server) == 2 and not result.events:
            break
        time.sleep(0.5)
    assert "gpu.0.gpm.dram_bw_util_ratio" in by_server[1] and "gpu.0.energy_j" in by_server[1]
    assert "gpu.1.gpm.tensor_any_ratio" in by_server[2] and "gpu.1.power_w" in by_server[2]
    assert not any(m.startswith("gpu.1.") for m in by_server[1])
    gpu.close()
