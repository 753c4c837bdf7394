"""Demo wiring of the image server: `demo-image` beside `demo`, its profiles, its first sweep."""

from __future__ import annotations

from pathlib import Path

from pwtest import REPO

from config.settings import load_settings
from dashboard.services.views.servers import (
    DEMO_IMAGE_SERVER,
    configured_servers,
    demo_image_sweep,
    seed_demo,
    sync_servers,
)
from launching.profiles import load_file
from storage import repo


def _settings(tmp_path: Path):
    return load_settings(env={"PITWALL_DATA_DIR": str(tmp_path), "PITWALL_CONFIG": "",
                              "PITWALL_DEMO": "auto", "PITWALL_DEMO_PORT": "31000"})


def test_demo_image_server_beside_the_llm_demo(tmp_path):
    servers = {s.name: s for s in configured_servers(_settings(tmp_path))}
    img = servers[DEMO_IMAGE_SERVER]
    assert servers["demo"].base_url.endswith(":31000")
    assert img.kind == "image" and img.managed and img.base_url == "http://127.0.0.1:31001"
    assert img.profile == "demo-image" and img.gpu_hourly_usd and img.gpu_hourly_usd > 0


def test_profiles_load_and_differ_only_by_acceleration():
    base = load_file(REPO / "profiles" / "demo-image.toml")
    fast = load_file(REPO / "profiles" / "demo-image-fast.toml")
    assert base.model_path == fast.model_path == "Qwen/Qwen-Image"
    assert base.flags["model-type"] == "diffusion" and base.env["SGLANG_SIM_GPU"] == "b300"
    assert {k: v for k, v in fast.flags.items() if base.flags.get(k) != v} == {
        "enable-torch-compile": True}
    assert {k: v for k, v in fast.env.items() if base.env.get(k) != v} == {"SGLANG_CACHE_DIT_ENABLED": "true"}


def test_seed_demo_queues_one_image_sweep_once(engine, tmp_path):
    settings = _settings(tmp_path)
    sync_servers(engine, settings)
    seed_demo(engine, settings)
    seed_demo(engine, settings)  # a second start queues nothing more
    img = repo.get_server(engine, name=DEMO_IMAGE_SERVER)
    runs = repo.list_probe_runs(engine, server_id=img.id)
    assert len(runs) == 1 and runs[0].api == "images" and runs[0].status == "pending"
    wl = runs[0].spec["workload"]
    req = demo_image_sweep()
    assert (wl["image_size"], wl["image_steps"]) == (req.image_size, req.image_steps) == ("1024x1024", 20)
