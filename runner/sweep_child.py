"""The sweep process: `python -m runner.sweep_child --spec spec.json|- [--db URL] [--run-id N]
[--parent-pid PID]`. Runs one collectors.probe.sweep.run_sweep and exits; a spec that names a
`trace` is a replay of that stored trace instead (collectors/trace/replay_run.py `run_spec`),
which needs the database (the trace is read from it, the run stored in it).

`--spec -` reads the spec from stdin: runner/sweeps.py sends it over a pipe, so the server's API
key it holds is never written to a file (a SIGKILL would leave that file behind).

The database URL comes from PITWALL_DATABASE_URL when --db is not given (runner/sweeps.py
passes it that way: a PostgreSQL password in argv would show in `ps`).

Started only by runner/sweeps.py (one process per sweep). With --parent-pid it dies with the
runner that started it: when that PID goes away (even by SIGKILL) the run is marked `aborted`
with the reason and this process exits, so no sweep outlives its runner.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from collectors.probe.report_model import SweepReport
from collectors.probe.sweep import SweepSpec, _jsonable, run_sweep
from runner.procs import exit_with_parent

ORPHANED = "The runner that started this sweep stopped (it was killed); start the sweep again."


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m runner.sweep_child",
                                description="Run one probe sweep described by a JSON spec.")
    p.add_argument("--spec", required=True, help="path of a SweepSpec JSON file, or - to read it from stdin")
    p.add_argument("--db", default=os.environ.get("PITWALL_DATABASE_URL") or None,
                   help="database URL to store the run in (default: PITWALL_DATABASE_URL)")
    p.add_argument("--run-id", type=int, default=None, help="existing ProbeRun to fill")
    p.add_argument("--json-out", default=None, help="write the full report here")
    p.add_argument("--parent-pid", type=int, default=None, help="exit when this process dies")
    args = p.parse_args(argv)
    source = "from stdin" if args.spec == "-" else args.spec
    try:
        text = sys.stdin.read() if args.spec == "-" else Path(args.spec).read_text(encoding="utf-8")
        raw = json.loads(text)
        replay = isinstance(raw, dict) and bool(raw.get("trace"))
        spec = None if replay else SweepSpec.from_dict(raw)
    except (OSError, ValueError, TypeError) as exc:
        print(f"pitwall sweep: cannot read the spec {source} ({exc}); fix the spec.", file=sys.stderr)
        return 2
    engine: Engine | None = None
    if args.db:
        from collectors.probe.cli import open_engine

        engine = open_engine(args.db)
    if args.parent_pid:
        def orphaned() -> None:
            if engine is not None and args.run_id is not None:
                from collectors.probe import store

                store.update_run(engine, run_id=args.run_id, status="aborted", error=ORPHANED,
                                 finished_at=time.time())
            print(f"pitwall sweep: {ORPHANED}", file=sys.stderr, flush=True)

        exit_with_parent(args.parent_pid, orphaned)
    if replay:
        return _replay(engine, raw, args.run_id)
    assert spec is not None
    try:
        report = SweepReport.of(asyncio.run(run_sweep(spec, engine=engine, run_id=args.run_id)))
    except Exception as exc:
        print(f"pitwall sweep: failed ({type(exc).__name__}: {exc}).", file=sys.stderr)
        return 1
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(_jsonable(report.to_dict()), indent=2), encoding="utf-8")
    return 0 if report.status in ("done", "aborted") else 1


def _replay(engine: Engine | None, spec: dict[str, Any], run_id: int | None) -> int:
    """A stored trace replayed into the stored run `run_id`."""
    from collectors.trace.model import TraceError
    from collectors.trace.replay_run import run_spec
    from storage import repo

    if engine is None or run_id is None:
        print("pitwall sweep: a replay needs --db and --run-id (the trace is read from the database).", file=sys.stderr)
        return 2
    try:
        run_spec(engine, spec, run_id)
    except (TraceError, OSError, ValueError) as exc:
        message = f"the replay did not run: {exc}"
        repo.update_probe_run(engine, run_id=run_id, status="failed", finished_at=time.time(),
                              error=message[:500])
        print(f"pitwall sweep: {message}", file=sys.stderr)
        return 1
    except Exception as exc:
        print(f"pitwall sweep: the replay failed ({type(exc).__name__}: {exc}).", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    os.environ.pop("PITWALL_PASSWORD", None)  # a sweep needs no operator secret (also dropped by procs.child_env)
    raise SystemExit(main())
