"""The engine seam, by grep: outside collectors/sglang/ nothing names SGLang, except the engine
registry, the settings defaults, profiles/, the simulator (SGLang's double), docs and tests.

PERMANENT lists the other files allowed to, each with its reason; TOOLING the build recipe and
benches of the real-SGLang tier (files or folders), each with its reason. Any other file that
names SGLang fails the test: reach the engine through collectors/engines.py instead.
"""

from __future__ import annotations

import subprocess

from pwtest import REPO

ALLOWED_PREFIXES = ("collectors/sglang/", "profiles/", "simulator/", "tests/")
ALLOWED_FILES = {"collectors/engines.py", "config/settings.py"}
PERMANENT = {
    "storage/db.py": "the v7 -> v8 upgrade names the Launch column it replaces",
    "config/servers.py": "ServerConfig.engine's default names the default engine (config may not import "
                         "collectors/engines.py), as storage/models.py's column default does",
    "storage/models.py": "the column defaults: Server.engine and Profile.entrypoint name the default engine "
                         "(storage may not import collectors/engines.py)",
    "scorecard/scorecard.schema.json": "the published export schema names its provenance field",
}
#: the real-SGLang tier's build recipe and the benches of the SGLang collectors and simulator: they
#: build, drive or measure that engine itself, so naming it is what they are for (a folder ends in /)
TOOLING = {
    ".ci/run": "CI builds the real-SGLang tier (scripts/sglang_cpu/) on a fresh machine and runs it",
    "Makefile": "the sglang-cpu target builds the real-SGLang tier; test-fast says it leaves that tier out",
    "pyproject.toml": "the project's description and the real_sglang test marker of that tier",
    "bench/collect_overhead.py": "measures the SGLang collectors on a captured real SGLang 0.5.23 payload",
    "bench/fleet.py": "a fleet of simulated SGLang servers whose series a real Prometheus scrapes",
    "bench/log_parse.py": "measures SGLang's log parser on SGLang's own log lines",
    "bench/metrics_parse.py": "measures the /metrics parse on SGLang's series names",
    "bench/relaunch_overhead.py": "measures relaunching a simulated SGLang server (its env, its import probe)",
    "bench/sim_capture_golden.py": "captures the simulator's golden files, with SGLang's log env unset",
    "bench/sim_metric_table.py": "regenerates the simulator's table of SGLang 0.5.23's metric families",
    "bench/stamp_server.py": "a stamping server in SGLang's /generate stream shape",
    "scripts/sglang_cpu/": "building and driving a real SGLang on CPU (tiny model, shim, fixtures) for its tier",
    "scripts/sglang_diffusion/": "reads SGLang Diffusion's own flag table into the bundled one",
    "scripts/sglang_router/": "reads the router's (sglang-router) own flag table into the bundled one",
    "scripts/vllm_cpu/": "the vLLM tier's recipe reuses the SGLang tier's tiny-model script",
}

def _naming_files() -> set[str]:
    out = subprocess.run(["git", "grep", "-il", "sglang"], cwd=REPO, capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode in (0, 1), out.stderr  # 1: no match
    return {p for p in out.stdout.splitlines()
            if not p.startswith(ALLOWED_PREFIXES) and not p.endswith(".md") and p not in ALLOWED_FILES
            and not any(p == t or (t.endswith("/") and p.startswith(t)) for t in TOOLING)}


def test_nothing_new_names_sglang_outside_its_engine_folder() -> None:
    new = sorted(_naming_files() - set(PERMANENT))
    assert not new, (f"these files name SGLang outside collectors/sglang/: {new}; reach it through "
                     "collectors/engines.py (get_engine(server.engine), display_name) instead")



#: the second engine's rule (its issue's acceptance): outside collectors/vllm/ only the engine
#: registry, profiles, docs, tests and the build recipe of its real tier name vLLM
VLLM_ALLOWED = ("collectors/vllm/", "profiles/", "tests/", "scripts/vllm_cpu/")
VLLM_FILES = {"collectors/engines.py", ".ci/run", "Makefile", "pyproject.toml"}


def test_nothing_names_vllm_outside_its_engine_folder() -> None:
    out = subprocess.run(["git", "grep", "-il", "vllm"], cwd=REPO, capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode in (0, 1), out.stderr
    named = [p for p in out.stdout.splitlines()
             if not p.startswith(VLLM_ALLOWED) and not p.endswith(".md") and p not in VLLM_FILES]
    assert not named, f"these files name vLLM outside collectors/vllm/: {named}"
