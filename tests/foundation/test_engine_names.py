"""The engine seam, by grep: outside collectors/sglang/ nothing names SGLang, except the engine
registry, the settings defaults, profiles/, the simulator (SGLang's double), docs and tests.

PERMANENT lists the other files allowed to, each with its reason. NOT_YET_MOVED lists the files
that still name SGLang and wait to go behind the engine (collectors/engines.py): the test fails
for any new file that names it, and for a listed file that no longer does (take it off the list).
"""

from __future__ import annotations

import subprocess

from pwtest import REPO

ALLOWED_PREFIXES = ("collectors/sglang/", "profiles/", "simulator/", "tests/")
ALLOWED_FILES = {"collectors/engines.py", "config/settings.py"}
PERMANENT = {
    "storage/db.py": "the v7 -> v8 upgrade names the Launch column it replaces",
    "storage/models.py": "the column defaults: Server.engine and Profile.entrypoint name the default engine "
                         "(storage may not import collectors/engines.py)",
    "scorecard/scorecard.schema.json": "the published export schema names its provenance field",
}
NOT_YET_MOVED = {
    ".ci/run",
    "Makefile",
    "bench/collect_overhead.py",
    "bench/fleet.py",
    "bench/log_parse.py",
    "bench/metrics_parse.py",
    "bench/relaunch_overhead.py",
    "bench/sim_capture_golden.py",
    "bench/sim_metric_table.py",
    "bench/stamp_server.py",
    "cli/main.py",
    "collectors/gpu_dcgm.py",
    "dashboard/components/scorecard.py",
    "export/rows.py",
    "dashboard/services/views/servers.py",
    "dashboards/grafana-pitwall.json",
    "pyproject.toml",
    "scorecard/build.py",
    "scorecard/compare.py",
    "scorecard/image.py",
    "scorecard/math.py",
    "scripts/sglang_cpu/build_env.sh",
    "scripts/sglang_cpu/capture_fixtures.py",
    "scripts/sglang_cpu/make_tiny_model.py",
    "scripts/sglang_cpu/real_server.py",
    "scripts/sglang_cpu/requirements.txt",
    "scripts/sglang_cpu/shim/sgl_kernel/__init__.py",
    "scripts/sglang_diffusion/extract_flags.py",
}


def _naming_files() -> set[str]:
    out = subprocess.run(["git", "grep", "-il", "sglang"], cwd=REPO, capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode in (0, 1), out.stderr  # 1: no match
    return {p for p in out.stdout.splitlines()
            if not p.startswith(ALLOWED_PREFIXES) and not p.endswith(".md") and p not in ALLOWED_FILES}


def test_nothing_new_names_sglang_outside_its_engine_folder() -> None:
    new = sorted(_naming_files() - set(PERMANENT) - NOT_YET_MOVED)
    assert not new, (f"these files name SGLang outside collectors/sglang/: {new}; reach it through "
                     "collectors/engines.py (get_engine(server.engine), display_name) instead")


def test_the_not_yet_moved_list_only_shrinks() -> None:
    gone = sorted(NOT_YET_MOVED - _naming_files())
    assert not gone, f"these files no longer name SGLang; take them off NOT_YET_MOVED: {gone}"
