"""The doctor: the server's engine's tuning rules (the Engine's `tuning_rules`, in
collectors/<engine>/doctor_rules.py), each finding with its evidence (the figures and the time
range they come from) and a suggested change that can become a candidate profile for
`pitwall tune` in one click (`make_candidate`).

`gather` reads the evidence of one server's window through storage.repo (the only I/O): the
series the engine's rules read, the window's events, the running launch's server args, GPU
memory headroom, the GPU wall (scorecard/gpu_wall.py) and, for image servers, its stage form.
`diagnose` and `checked` are pure: the engine's rules over that evidence (collectors/tuning.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sqlalchemy.engine import Engine

from collectors.engines import DEFAULT_ENGINE, display_name, get_engine
from collectors.tuning import Evidence as Evidence  # the rules' types; importable from here too
from collectors.tuning import Finding as Finding
from collectors.tuning import TuningRules
from storage import repo


def _rules(engine: str | None) -> TuningRules | None:
    """The tuning rules of the engine called `engine` (None: the default); None when it has none."""
    return get_engine(engine or DEFAULT_ENGINE).tuning_rules


def guidance(ev: Evidence | None) -> str:
    """Where the rules come from, as the Doctor's caption names it: "<engine>'s tuning guidance"."""
    return f"{display_name((ev.engine if ev is not None else None) or DEFAULT_ENGINE)}'s tuning guidance"


def diagnose(ev: Evidence) -> list[Finding]:
    """The findings of the server's engine's rules over `ev` (none for an engine without rules)."""
    rules = _rules(ev.engine)
    return rules.diagnose(ev) if rules is not None else []


def checked(ev: Evidence) -> list[str]:
    """What each rule measured in the window and where it would fire, one line a rule, so a
    quiet Doctor shows its reading rather than nothing (an idle demo fires no rule: that is
    the right answer, not a missing one)."""
    rules = _rules(ev.engine)
    return rules.checked(ev) if rules is not None else [f"{display_name(ev.engine or DEFAULT_ENGINE)} has no tuning rules."]


def gather(engine: Engine, server: str, *, since: float, until: float, light: bool = False) -> Evidence | None:
    """The evidence of one server's window, from the running launch's start when that is later
    (None for an unknown server). `light`: the series, events and launch args only, no GPU
    figures (the Overview's service card asks every refresh; rules that read GPUs stay quiet)."""
    srv = repo.get_server(engine, name=server)
    if srv is None or srv.id is None:
        return None
    launch = repo.latest_launch(engine, server_id=srv.id)
    if launch is not None and launch.ended_at is None and launch.started_at > since:
        since = launch.started_at  # judge the running launch's settings on its own figures only
    ev = Evidence(since=since, until=until, engine=srv.engine)
    rules = _rules(srv.engine)
    for key in (rules.series if rules is not None else ()):
        ev.series[key] = repo.sample_values(engine, server_id=srv.id, metric=key, since=since, until=until)
    events = repo.list_events(engine, server_id=srv.id, since=since, until=until, limit=5000)
    if not events.empty:
        ev.events = {str(k): int(v) for k, v in events["kind"].value_counts().items()}
    ev.server_args = dict((launch.server_args if launch is not None else None) or {})
    if light:
        return ev
    for name in repo.metric_names(engine, server_id=srv.id, prefix="gpu."):
        if name.endswith(".mem_total_bytes"):
            total = repo.sample_values(engine, server_id=srv.id, metric=name, since=since, until=until)
            used = repo.sample_values(engine, server_id=srv.id, metric=name.replace("total", "used"),
                                      since=since, until=until)
            if total.size and used.size:
                ev.gpu_free_bytes.append(float(np.median(total)) - float(np.median(used)))
    from scorecard.gpu_wall import gpu_walls

    ev.gpu_walls = gpu_walls(engine, server_id=srv.id, since=since, until=until)["gpus"]
    if srv.kind == "image":
        from scorecard.gpu_wall_stage import stage_walls

        ev.stage_walls = stage_walls(engine, server_id=srv.id, since=since, until=until)
    for run in repo.list_probe_runs(engine, limit=20):  # a CLI probe by URL has no server_id
        if run.created_at >= since and (run.server_id == srv.id or run.url == srv.base_url):
            ev.prompt_set = ((run.spec or {}).get("workload") or {}).get("prompt_set")
            break
    return ev


def make_candidate(engine: Engine, profiles_dir: Path, out_dir: Path, server: str, finding: Finding) -> str:
    """Write the finding's change as a profile derived from the server's own (read from
    `profiles_dir`, else `out_dir`) into `out_dir` (launch.profiles.candidates_dir: the data folder,
    never the source tree) and return its name: the candidate for `pitwall tune` / the Tune page."""
    from dashboard.services.tune import TuneRequestError, write_grid_profiles

    srv = repo.get_server(engine, name=server)
    launch = repo.latest_launch(engine, server_id=srv.id) if srv is not None and srv.id is not None else None
    running = launch.profile_name if launch is not None and launch.ended_at is None else None
    base = running or (srv.profile if srv is not None else None)  # the settings the evidence is about
    if not base:
        raise TuneRequestError(f"Server {server!r} has no profile to derive a candidate from.")
    if not (Path(profiles_dir) / f"{base}.toml").is_file() and (Path(out_dir) / f"{base}.toml").is_file():
        profiles_dir = out_dir  # a candidate derived from an earlier candidate
    return write_grid_profiles(engine, profiles_dir, base, [{k: str(v) for k, v in finding.flags.items()}],
                               out_dir=out_dir)[0]
