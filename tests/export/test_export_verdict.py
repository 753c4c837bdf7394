"""Review exports lead with the verdict (issue 30): grades and deltas first, then figures, then
provenance (workload, server args) folded; each server's GPU line names its own GPUs; chart
legends read in words (the Server page's series labels), never internal keys."""

from __future__ import annotations

import re

from gpu_seed import FIXTURES, MIG_FIXTURE, T0, store_dcgm

from dashboard.services.export import formats
from dashboard.services.scorecard.build import build_scorecard
from storage import repo

# ---------------------------------------------------------------------------------------------
# each server its own GPU


def test_two_servers_on_different_gpus_export_each_its_own(engine, tmp_path):
    """One host, two exporters' worth of cards (as the demo: the LLM on GPU 0, the image server on
    GPU 1): the host's `gpu:info` lists both; each scorecard names only its server's card."""
    payload = (FIXTURES / MIG_FIXTURE).read_text()
    payload = re.sub(r'(gpu="0",[^}]*modelName=)"NVIDIA H20"', r'\1"NVIDIA B300"', payload)
    payload = re.sub(r'(gpu="1",[^}]*modelName=)"NVIDIA H20"', r'\1"NVIDIA H200"', payload)
    mixed = tmp_path / "mixed.prom"
    mixed.write_text(payload)
    ids = {}
    for name, gpu in (("llm", 1), ("image", 0)):
        srv = repo.upsert_server(engine, name=name, base_url="http://127.0.0.1:1", kind="llm",
                                 gpu_indices=[gpu])
        ids[name] = int(srv.id)
        store_dcgm(engine, str(mixed), frames=5, server_id=srv.id, gpu_indices=[gpu])
    info = repo.load_state(engine, key="gpu:info")
    assert {g["name"] for g in info["gpus"]} == {"NVIDIA B300", "NVIDIA H200"}  # the host's
    cards = [build_scorecard(engine, server=n, since_s=60, now=T0 + 10) for n in ("llm", "image")]
    assert [c.provenance["gpu_model"] for c in cards] == ["NVIDIA H200", "NVIDIA B300"]
    md = formats.render("md", cards).decode()
    gpu_lines = [line for line in md.splitlines() if line.startswith("| GPU |")]
    assert len(gpu_lines) == 2
    assert "H200" in gpu_lines[0] and "B300" not in gpu_lines[0]
    assert "B300" in gpu_lines[1] and "H200" not in gpu_lines[1]
