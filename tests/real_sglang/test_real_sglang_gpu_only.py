"""What SGLang 0.5.23 cannot run on CPU, launched through Pitwall: NGRAM speculative decoding
(`sgl_kernel.speculative` is a CUDA build's module), HiCache's host tier (its host pool asks
torch for CUDA) and PD disaggregation (a prefill server refuses the `fake` backend; the default,
mooncake, is not installed, and its wheel needs the CUDA driver's libcuda.so.1 even over TCP). Pitwall's launch fails with the server's own reason in what the operator reads
(the intent's message or the launch's events), and leaves no process behind. The simulator models
both (tests/simulator); only this tier says what the real CPU build does with them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from real_sglang_rig import running_rig

from storage import repo

pytestmark = [pytest.mark.real_sglang, pytest.mark.slow]

CASES = {
    "ngram": ({"speculative-algorithm": "NGRAM"}, "sgl_kernel.speculative"),
    "hicache": ({"enable-hierarchical-cache": True}, "Torch not compiled with CUDA enabled"),
    # PD: the one test backend is refused on a prefill server as its arguments resolve
    "pd-fake": ({"disaggregation-mode": "prefill", "disaggregation-transfer-backend": "fake"},
                "Prefill server does not support 'fake' as the transfer backend"),
    # ... and the default backend's package (mooncake-transfer-engine) needs the CUDA driver's
    # libcuda.so.1 even for its TCP transport: not installed on a CPU host
    "pd-mooncake": ({"disaggregation-mode": "prefill"}, "ImportError: Please install mooncake by following the instructions"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_gpu_only_feature_fails_its_launch_with_the_servers_reason(name: str, sglang_cpu_env: dict[str, str],
                                                                     tmp_path: Path) -> None:
    flags, reason = CASES[name]
    with running_rig(sglang_cpu_env, tmp_path, {name: flags}, default=name) as rig:
        final = rig.request("launch", name)
        assert final.state == "failed", final
        events = repo.list_events(rig.engine, server_id=rig.sid).to_dict("records")
        said = " ".join([final.message or "", *(f"{e['message']} {e.get('raw') or ''}" for e in events)])
        assert reason in said, said[-2000:]
        launch: Any = repo.latest_launch(rig.engine, server_id=rig.sid)
        assert launch is not None and launch.status in ("failed", "exited"), launch
