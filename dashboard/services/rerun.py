"""After a relaunch: rerun the server's baseline workload on the new launch, then Compare.

The baseline is the newest finished sweep of the launch the relaunch replaced (`baseline_run`:
the intent's result names it, `replaced_launch_id`), never a later candidate's sweep; a relaunch a
tune requested (requested_by "... (tune R-N)") offers no rerun. "Rerun the baseline workload"
records a sweep of the baseline's stored spec as it is (services/views/benchmarks.py
`start_sweep_from_spec`: only url, server, launch, name and `baseline_run_id` change), so the two
runs share a fingerprint and the sweep also checks its outputs against the baseline's; a rerun
already recorded after the relaunch is returned, not recorded twice. When it is done, `compare_params` opens the Compare page with both runs picked,
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
    baseline: ProbeRun | None  # the replaced launch's newest finished sweep (None: nothing to rerun)
    rerun: ProbeRun | None  # the rerun recorded after the relaunch finished, newest
    compare_params: dict[str, str] | None  # {"runs": "<baseline>,<new>"} once the rerun is done
    offered: bool = True  # False: a tune's relaunch, or no launch was replaced; no panel at all


def by_tune(relaunch: Intent) -> bool:
    """A relaunch a tune requested (runner/tunes.py records "<who> (tune R-N)")."""
    return "(tune R-" in (relaunch.requested_by or "")


def replaced_launch(relaunch: Intent) -> int | None:
    """The launch id the relaunch stopped (None: the server was not running)."""
    value = (relaunch.result or {}).get("replaced_launch_id")
    return int(value) if value is not None else None


def baseline_run(engine: Engine, server_id: int, launch_id: int, before: float) -> ProbeRun | None:
    """The newest finished sweep of `launch_id` created before the relaunch was requested."""
    return repo.newest_probe_run(engine, server_id=server_id, launch_id=launch_id, status="done", before=before)


def _rerun_of(engine: Engine, server_id: int, base: ProbeRun, after: float) -> ProbeRun | None:
    assert base.id is not None
    return repo.newest_probe_run(engine, server_id=server_id, baseline_run_id=base.id, since=after)


def state(engine: Engine, relaunch: Intent) -> RerunState:
    """What the Profiles page offers after `relaunch` (a finished relaunch intent)."""
    replaced = replaced_launch(relaunch)
    if relaunch.server_id is None or by_tune(relaunch) or replaced is None:
        return RerunState(None, None, None, offered=False)
    base = baseline_run(engine, relaunch.server_id, replaced, relaunch.created_at)
    if base is None:
        return RerunState(None, None, None)
    rerun = _rerun_of(engine, relaunch.server_id, base, relaunch.finished_at or relaunch.created_at)
    done = rerun is not None and rerun.status == "done"
    return RerunState(base, rerun, {"runs": f"{base.id},{rerun.id}"} if done and rerun else None)


def workload_words(run: ProbeRun) -> str:
    """"run 12: shared-prefix, levels 1, 4, 8, 40 requests a level" for the button's caption."""
    spec: dict[str, Any] = run.spec or {}
    work = spec.get("workload") or {}
    levels = ", ".join(f"{float(v):g}" for v in spec.get("levels") or [])
    return (f"run {run.id}: {work.get('prompt_set') or run.api}, levels {levels or '—'}, "
            f"{spec.get('requests') or '?'} requests a level")


def rerun_baseline(engine: Engine, server_name: str, base: ProbeRun, relaunch: Intent, *,
                   actor: str) -> tuple[int, int | None]:
    """Record a sweep of the server's running launch with `base`'s stored spec; (run id, intent
    id). A rerun already recorded after `relaunch` finished (another tab) is returned instead,
    with intent id None."""
    assert base.id is not None and base.server_id is not None
    existing = _rerun_of(engine, base.server_id, base, relaunch.finished_at or relaunch.created_at)
    if existing is not None and existing.id is not None:
        return existing.id, None
    return benchmarks.start_sweep_from_spec(engine, server_name, dict(base.spec or {}),
                                            name=f"rerun of run {base.id}", baseline_run_id=base.id,
                                            requested_by=actor)
