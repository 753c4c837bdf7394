"""Launch validation goes through the server's engine (collectors/engines.py): its flag table,
its own parser (or none), its secret flags and its profile kinds; nothing SGLang's is asked of
another engine's server."""

from __future__ import annotations

import sys

import pytest
import toy_engine

from collectors.engines import ENGINES
from launching import launcher
from launching.profiles import ProfileSpec
from storage.models import Server


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(ENGINES, "toy", toy_engine.ENGINE)
    return toy_engine.ENGINE


def test_a_toy_servers_flags_are_judged_by_the_toy_engine(toy) -> None:
    server = Server(id=1, name="t", base_url="http://127.0.0.1:9", engine="toy", python=sys.executable)
    # unknown to SGLang's bundled table (an error there); the toy engine's table accepts anything
    spec = ProfileSpec(name="t", model_path="org/m", entrypoint="toy", flags={"toy-speed": 3})
    report = launcher.validate(spec, server, replacing=True, gpu_snapshot={})
    assert report.checked_by == "bundled Toy 9.9 flag table"  # the toy has no parser of its own
    assert [i for i in report.issues if i.flag == "toy-speed"] == []
    (hf,) = [i for i in report.issues if i.flag == "model_path"]
    assert hf.message == "org/m is not a local folder; Toy will treat it as a Hugging Face id (downloaded unless cached)."


def test_an_sglang_server_still_gets_sglangs_table() -> None:
    spec = ProfileSpec(name="x", model_path="org/m", entrypoint="simulator.launch_server", flags={"toy-speed": 3})
    report = launcher.validate(spec, use_real_parser=False)
    assert report.checked_by == "bundled SGLang 0.5.23 flag table"
    assert [i.flag for i in report.errors] == ["toy-speed"]
    assert "org/m is not a local folder; SGLang will treat it as a Hugging Face id" in report.lines()[-1]


def test_profile_kind_and_secrets_come_from_the_engine(toy) -> None:
    from collectors.engines import get_engine

    sglang = get_engine("sglang")
    assert sglang.profile_kind({"model-type": "diffusion"}) == "image"
    assert sglang.profile_kind({}) == "llm" and toy.profile_kind({"model-type": "diffusion"}) == "llm"
    public, secrets = sglang.split_secrets({"api-key": "k", "tp-size": 2})
    assert public == {"tp-size": 2} and secrets == {"api-key": "k"}
    assert toy.split_secrets({"api-key": "k"}) == ({"api-key": "k"}, {})


def test_preflight_reads_the_engines_table(toy, monkeypatch) -> None:
    import dataclasses

    from collectors.base import Preflight
    from launching import preflight
    from launching.preflight import Gpu, HostFacts

    gib = 1024**3
    facts = HostFacts(cuda_driver=12040, driver="550", engine_version="2.1", engine="toy",
                      gpus=[Gpu(0, "Tesla T4", 16 * gib, 0)])
    (none,) = preflight.preflight("org/m", {}, facts)
    assert none.message.startswith("Pitwall has no preflight table for Toy;")
    table = Preflight(wheel_cuda=(((2, 0), (12, 8)), ((0,), (11, 8))), min_sm=(8, 0),
                      old_card="Toy needs sm80", default_mem_fraction=0.5, no_kv_cache="'toy: no room'")
    monkeypatch.setitem(ENGINES, "toy", dataclasses.replace(toy, preflight=table))
    (driver,) = preflight.check_driver(facts)
    assert driver.severity == "warning" and "Toy 2.1 installs torch built for CUDA 12.8" in driver.message
    (card,) = preflight.check_architecture(facts, {})
    assert card.severity == "error" and "is sm75; Toy needs sm80, so the launch fails" in card.message


def test_preflight_of_an_sglang_server_names_sglang() -> None:
    from launching import preflight
    from launching.preflight import Gpu, HostFacts

    facts = HostFacts(cuda_driver=12040, driver="550", engine_version="0.5.6",
                      gpus=[Gpu(0, "Tesla V100-SXM2-32GB", 32 * 1024**3, 0)])
    (driver,) = preflight.check_driver(facts)
    assert "SGLang 0.5.6 installs torch built for CUDA 12.8" in driver.message
    (card,) = preflight.check_architecture(facts, {})
    assert "is sm70; SGLang only supports sm75 and above, so the launch fails" in card.message


def test_the_sandbox_reads_the_servers_engines_tables(toy) -> None:
    from launching.sandbox import sandbox_issues

    spec = ProfileSpec(name="t", model_path="-m", entrypoint="toy", env={"TOY_THREADS": "2"})
    server = Server(id=1, name="t", base_url="http://127.0.0.1:9", engine="toy")
    assert sandbox_issues(spec, None, "toy", server) == []  # the toy engine refuses neither
    sglang = sandbox_issues(spec, None, "sglang", server)
    assert {i.flag for i in sglang if i.severity == "error"} == {"entrypoint", "model_path", "TOY_THREADS"}


def test_a_profile_may_name_any_known_engines_entrypoint(toy, monkeypatch) -> None:
    import dataclasses

    from launching.profiles import ProfileError, parse_profile

    monkeypatch.setitem(ENGINES, "toy", dataclasses.replace(toy, entrypoints=("toy serve",)))
    assert parse_profile('name = "a"\nmodel_path = "m/x"\nentrypoint = "toy serve"\n').entrypoint == "toy serve"
    assert parse_profile('name = "a"\nmodel_path = "m/x"\n').entrypoint == "sglang.launch_server"
    with pytest.raises(ProfileError) as err:
        parse_profile('name = "a"\nmodel_path = "m/x"\nentrypoint = "no serve"\n')
    assert str(err.value) == ("<profile>: entrypoint is 'no serve'; expected a Python module such as "
                              "\"sglang.launch_server\" or \"sglang serve\" or \"sglang_router.launch_router\".")
