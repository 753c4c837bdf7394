"""After a relaunch: rerun the server's baseline workload on the new launch, then Compare.

The baseline is the server's last finished sweep created before the relaunch was requested
(`baseline_run`); "Rerun the baseline workload" records a sweep of the same API, levels, requests
per level and workload through the path Benchmarks uses (services/views/benchmarks.py
`start_sweep`), with `baseline_run_id` set, so the sweep also checks its outputs against the
baseline's. When it is done, `compare_params` opens the Compare page with both runs picked,
baseline first (`/compare?runs=<baseline>,<new>`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine

from dashboard.services.views import benchmarks
from storage import repo
from storage.models import Intent, ProbeRun


@dataclass(frozen=True)
class RerunState:
    baseline: ProbeRun | None  # the last finished sweep before the relaunch (None: nothing to rerun)
    rerun: ProbeRun | None  # the rerun recorded after the relaunch finished, newest
    compare_params: dict[str, str] | None  # {"runs": "<baseline>,<new>"} once the rerun is done


def baseline_run(engine: Engine, server_id: int, before: float) -> ProbeRun | None:
    for run in repo.list_probe_runs(engine, server_id=server_id, limit=200):
        if run.status == "done" and run.created_at < before:
            return run
    return None


def state(engine: Engine, relaunch: Intent) -> RerunState:
    """What the Profiles page offers after `relaunch` (a finished relaunch intent)."""
    if relaunch.server_id is None:
        return RerunState(None, None, None)
    base = baseline_run(engine, relaunch.server_id, relaunch.created_at)
    if base is None:
        return RerunState(None, None, None)
    after = relaunch.finished_at or relaunch.created_at
    rerun = next((r for r in repo.list_probe_runs(engine, server_id=relaunch.server_id, limit=50)
                  if r.baseline_run_id == base.id and r.created_at >= after), None)
    done = rerun is not None and rerun.status == "done"
    return RerunState(base, rerun, {"runs": f"{base.id},{rerun.id}"} if done and rerun else None)


def workload_words(run: ProbeRun) -> str:
    """"run 12: shared-prefix, levels 1, 4, 8, 40 requests a level" for the button's caption."""
    spec: dict[str, Any] = run.spec or {}
    work = spec.get("workload") or {}
    levels = ", ".join(f"{float(v):g}" for v in spec.get("levels") or [])
    return (f"run {run.id}: {work.get('prompt_set') or run.api}, levels {levels or '—'}, "
            f"{spec.get('requests') or '?'} requests a level")


def rerun_baseline(engine: Engine, server_name: str, base: ProbeRun, *, actor: str) -> tuple[int, int]:
    """Record a sweep of the server's running launch with `base`'s workload; (run id, intent id)."""
    spec: dict[str, Any] = base.spec or {}
    work = spec.get("workload") or {}
    req = benchmarks.SweepRequest(
        server=server_name, levels=[int(v) for v in spec.get("levels") or [1]],
        requests=int(spec.get("requests") or 1), api=str(spec.get("api") or base.api),
        prompt_set=str(work.get("prompt_set") or "builtin"),
        max_new_tokens=int(work.get("max_new_tokens") or 64), input_tokens=int(work.get("input_tokens") or 128),
        ignore_eos=bool(work.get("ignore_eos")), name=f"rerun of run {base.id}",
        image_size=str(work.get("image_size") or "1024x1024"), image_steps=work.get("image_steps"),
        image_guidance=work.get("image_guidance"), baseline_run_id=base.id,
    )
    return benchmarks.start_sweep(engine, req, requested_by=actor)
