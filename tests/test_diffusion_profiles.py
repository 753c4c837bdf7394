"""The demo image profiles pass Pitwall's own validation against the diffusion flag table."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.sglang import flags as sglang_flags
from launching import launcher, profiles

PROFILES = Path(__file__).resolve().parents[1] / "profiles"


@pytest.mark.parametrize("name", ["demo-image", "demo-image-fast"])
def test_demo_image_profiles_validate(name: str) -> None:
    spec = profiles.load_file(PROFILES / f"{name}.toml")
    report = launcher.validate(spec, use_real_parser=False)
    assert [i for i in report.issues if i.severity == "error"] == []
    assert sglang_flags.is_diffusion(spec.flags)


def test_diffusion_flags_checked_against_the_diffusion_table() -> None:
    diff = {"model-type": "diffusion", "num-gpus": 2, "ulysses-degree": 2}
    assert [i for i in sglang_flags.check_flags(diff) if i.severity == "error"] == []
    llm_only = sglang_flags.check_flags({"model-type": "diffusion", "mem-fraction-static": 0.8})
    assert any("not an SGLang 0.5.23 diffusion server flag" in i.message for i in llm_only)
    # the same diffusion flag on an LLM profile is unknown there
    assert any(i.flag == "ulysses-degree" for i in sglang_flags.check_flags({"ulysses-degree": 2}))
    bad = sglang_flags.check_flags({"model-type": "diffusion", "num-gpus": 0})
    assert any(i.flag == "num-gpus" and i.severity == "error" for i in bad)
    assert any(i.flag == "model-type" for i in sglang_flags.check_flags({"model-type": "video"}))


def test_diffusion_needs_sglang_serve_entrypoint() -> None:
    spec = profiles.ProfileSpec(name="x", model_path="Qwen/Qwen-Image",
                                entrypoint="sglang.launch_server",
                                flags={"model-type": "diffusion"}, env={})
    assert any(i.flag == "model-type" for i in launcher.sandbox_issues(spec))
