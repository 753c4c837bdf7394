"""Tune runs in the runner: relaunch a managed server under each candidate profile,
run the same probe workload, score, rank, and put the original profile (or the winner) back.

Flow:
1. `pitwall tune` or the Tune panel (dashboard/services/tune.py `start_tune`) records an
   Intent(kind="tune", payload={"server", "profiles", "sweep", "apply"}). `sweep` is a SweepSpec
   dict without url / server / launch (the same for every candidate: one fingerprint).
2. The runner's `tune` lane calls `Tunes.handle`. Per candidate, in order: a `relaunch` intent
   (the control lane validates the profile, stops, starts, waits for ready and rolls back on
   failure), then a stored ProbeRun run by the one sweep runner (runner/sweeps.py; the spec's
   warm-up requests warm the server up), then the injected scorer (the scorecard of that run),
   and the record goes into Intent.result at once.
3. A candidate that does not come up, whose server exits during the workload, or whose sweep
   fails is recorded `failed` with the cause, and the search goes on.
4. At the end the candidates are ranked (runner/tune_rank.py) and the server is relaunched
   under its original profile, or the winner with `apply`. A tie at the top (goodput inside
   the measured spread) has no winner: the original profile comes back even with `apply`, and
   the state's `verdict` sentence says who tied and inside which spread.

The state is the intent's `result`, written after every step: a runner that dies mid-tune
leaves the intent `running`; the next runner puts it back to pending (storage/kinds.py
RESUMABLE_INTENT_KINDS) and this handler resumes with the candidate that was not recorded.
Stop: `payload.stop = true` (written by `request_stop`) ends the search after the current step.

The runner package never imports dashboard/: the scorer comes in from the wiring.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import Engine

from collectors.probe.report_model import SweepReport
from runner import tune_rank
from runner.sweeps import Sweeps
from storage import repo
from storage.errors import CollectorError, Interrupted
from storage.kinds import CONTROL_KINDS, FINAL_INTENT_STATES, request_label
from storage.models import Intent, Server

#: (probe run id, server name) -> {"scorecard": {dimension: {...}}, "slo": {key: target}, "image": bool}
Scorer = Callable[[int, str], dict[str, Any]]

RELAUNCH_WAIT_S = 1800.0
POLL_S = 0.3
RUNNER_STOPPED = "runner stopped"  # the supervisor's end reason of a launch it stopped at shutdown


class _Interrupted(Interrupted):
    """The runner is stopping: leave the tune `running` for the next runner to resume."""


class _TrialFailed(CollectorError):
    """A replay of the capacity search did not finish: the candidate is recorded failed."""


def request_stop(engine: Engine, intent_id: int) -> bool:
    """Ask a tune to stop after its current step; False when it is not open."""
    intent = repo.get_intent(engine, intent_id=intent_id)
    if intent is None or intent.kind != "tune" or intent.state in FINAL_INTENT_STATES:
        return False
    repo.update_intent(engine, intent_id=intent_id, payload={**(intent.payload or {}), "stop": True})
    return True


class Tunes:
    """The tune lane's handler; shares the runner's Sweeps (one owner of sweep processes)."""

    def __init__(self, engine: Engine, sweeps: Sweeps, scorer: Scorer, *,
                 relaunch_wait_s: float = RELAUNCH_WAIT_S) -> None:
        self.engine = engine
        self.sweeps = sweeps
        self.scorer = scorer
        self.relaunch_wait_s = relaunch_wait_s
        self._closing = threading.Event()
        self._eta_s: dict[int, float] = {}  # intent id -> the last estimate, shown at every stage

    def close(self) -> None:
        """At runner shutdown: stop after the current step and record nothing half-done."""
        self._closing.set()

    # -- the tune intent --------------------------------------------------------------------------
    def handle(self, intent: Intent) -> None:
        assert intent.id is not None
        payload = intent.payload or {}
        server = repo.get_server(self.engine, name=str(payload.get("server") or ""))
        profiles = [str(p) for p in payload.get("profiles") or []]
        if server is None or not server.managed or not profiles:
            why = ("names no candidate profile" if server is not None and server.managed and not profiles
                   else f"names server {payload.get('server')!r}, which is not a managed server")
            repo.update_intent(self.engine, intent_id=intent.id, state="failed",
                               message=f"{request_label(intent.id, 'tune', start=True)} {why}; start it again with a managed server and profiles.")
            return
        state = dict(intent.result or {})
        if "original_profile" not in state:
            state.update(server=server.name, original_profile=self._current_profile(server),
                         candidates=[], workload=None, slo=None, winner=None, restored_profile=None)
            self._save(intent.id, state)
        try:
            self._search(intent, server, profiles, state)
            self._finish(intent, server, state, bool(payload.get("apply")))
        except _Interrupted:
            detail = "paused: the runner stopped; the next runner resumes with the candidate not yet recorded"
            last = repo.get_intent(self.engine, intent_id=intent.id)
            prog = dict((last.progress if last is not None else None) or {})
            repo.update_intent(self.engine, intent_id=intent.id, progress={**prog, "stage": "paused", "detail": detail})

    def _search(self, intent: Intent, server: Server, profiles: list[str], state: dict[str, Any]) -> None:
        assert intent.id is not None
        started = time.monotonic()
        done_here = 0
        for i, profile in enumerate(profiles):
            if i < len(state["candidates"]):
                continue  # recorded before a runner restart
            if self._closing.is_set():
                raise _Interrupted
            if self._stop_requested(intent.id):
                state["stopped"] = True
                return
            self._progress(intent.id, i, len(profiles), profile, "relaunching", 0.0,
                           self._eta(started, done_here, len(profiles) - i))
            rec = self._candidate(intent, server, profile, i, len(profiles), state)
            if self._closing.is_set():
                raise _Interrupted
            state["candidates"].append(rec)
            done_here += 1
            self._save(intent.id, state)

    # -- one candidate ------------------------------------------------------------------------------
    def _candidate(self, intent: Intent, server: Server, profile: str, i: int, n: int,
                   state: dict[str, Any]) -> dict[str, Any]:
        assert intent.id is not None
        rec: dict[str, Any] = {"profile": profile, "status": "failed", "reason": "", "rank": None,
                               "goodput_rps": None, "scorecard": {}, "launch_id": None, "probe_run_ids": [],
                               "levels": []}
        ok, launch_id, why = self._relaunch(intent, server, profile)
        rec["launch_id"] = launch_id
        if not ok:
            rec["reason"] = f"did not start: {why}"
            return rec
        if ((intent.payload or {}).get("sweep") or {}).get("trace"):
            return self._capacity(intent, server, launch_id, (i, n, profile), rec, state)
        run_id, status, error = self._sweep(intent, server, launch_id, (i, n, profile))
        rec["probe_run_ids"] = [run_id]
        run = repo.get_probe_run(self.engine, run_id=run_id)
        if run is not None:
            state["workload"] = state.get("workload") or run.fingerprint or None
            rec["levels"] = [lv.to_dict() for lv in SweepReport.of(run.report).levels]
        launch = repo.get_launch(self.engine, launch_id=launch_id) if launch_id else None
        if launch is not None and (launch.end_reason or "").startswith(RUNNER_STOPPED):
            raise _Interrupted
        if launch is not None and launch.ended_at is not None:
            rec["reason"] = f"the server stopped during the workload ({launch.end_reason or launch.status})"
            return rec
        if status != "done":
            rec["reason"] = f"the workload did not finish: {error or status}"
            return rec
        self._progress(intent.id, i, n, profile, "scoring", 0.95, None)
        try:
            scored = self.scorer(run_id, server.name)
        except Exception as exc:  # a scorecard that cannot be built: recorded, the search goes on
            rec["reason"] = f"could not be scored: {exc}"
            return rec
        state["slo"] = scored.get("slo") if state.get("slo") is None else state["slo"]
        state["image"] = bool(scored.get("image"))
        rec.update(status="scored", scorecard=scored.get("scorecard") or {})
        return rec

    def _relaunch(self, intent: Intent, server: Server, profile: str) -> tuple[bool, int | None, str]:
        """Relaunch through the control lane and wait: (ready, launch id, why not)."""
        assert server.id is not None
        by = f"{intent.requested_by} ({request_label(intent.id, 'tune')})"
        # a lifecycle action still under way (the server's own first launch when the tune was
        # requested right after `pitwall up`, or a relaunch this tune requested before a runner
        # restart): let it run out first, or ours would be refused as a second action for the server
        for left in repo.list_intents(self.engine, server_id=server.id, kinds=CONTROL_KINDS,
                                      states=("pending", "running"), limit=10):
            if left.id is not None:
                self._wait_intent(left.id)
        sub = repo.create_intent(self.engine, kind="relaunch", server_id=server.id, payload={"profile": profile},
                                 requested_by=by)
        assert sub.id is not None
        final = self._wait_intent(sub.id)
        if self._closing.is_set() or (final is not None and "runner is stopping" in (final.message or "")):
            raise _Interrupted
        if final is None:
            return False, None, f"the relaunch ({request_label(sub.id, 'relaunch')}) did not finish within {self.relaunch_wait_s:.0f} s"
        result = final.result or {}
        if final.state != "done":
            return False, result.get("launch_id"), final.message or final.state
        return True, result.get("launch_id"), ""

    def _wait_intent(self, intent_id: int) -> Intent | None:
        deadline = time.monotonic() + self.relaunch_wait_s
        while time.monotonic() < deadline:
            if self._closing.is_set():
                raise _Interrupted
            got = repo.get_intent(self.engine, intent_id=intent_id)
            if got is not None and got.state in FINAL_INTENT_STATES:
                return got
            time.sleep(POLL_S)
        return None

    def _capacity(self, intent: Intent, server: Server, launch_id: int | None, where: tuple[int, int, str],
                  rec: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        """A trace workload: the highest speed-up of the trace the candidate serves within the SLO
        (collectors/trace/capacity.py, its repeats giving the interval), each speed tried a stored
        replay run by the one sweep runner; the knee's run is the one scored."""
        from collectors.trace.capacity import search
        from collectors.trace.model import TraceError
        from collectors.trace.replay import select, span_s
        from collectors.trace.replay_run import auto_range, load, options_of

        assert intent.id is not None
        spec = dict((intent.payload or {}).get("sweep") or {})
        slo = {k: float(v) for k, v in (spec.get("slo") or {}).items()}
        i, n, profile = where
        try:
            _, requests = load(self.engine, str(spec["trace"]))
        except TraceError as exc:
            rec["reason"] = f"the workload did not start: {exc}"
            return rec
        options = options_of({**spec, "speed": 1.0})
        span, chosen = span_s(requests, options), len(select(requests, options)[0])
        rate = (chosen - 1) / span if span > 0 and chosen > 1 else 0.0
        max_speed = float(spec.get("max_speed") or 1024.0)
        runs: list[int] = []

        def measure(speed: float) -> dict[str, Any]:
            if self._closing.is_set():
                raise _Interrupted
            self._progress(intent.id or 0, i, n, profile, f"capacity search, trial {len(runs) + 1} at {speed:.3g}x",
                           min(0.9, 0.1 + 0.05 * len(runs)), None)
            # each trial its own prompts (a fresh seed): none finds an earlier trial's in the prefix cache
            run_id, status, error = self._sweep(intent, server, launch_id, where, spec={**spec, "speed": speed},
                                                label=f"{speed:.3g}x")
            runs.append(run_id)
            run = repo.get_probe_run(self.engine, run_id=run_id)
            if status != "done" or run is None:
                raise _TrialFailed(f"the replay at {speed:.3g}x did not finish: {error or status}")
            return {**(run.report or {}), "run_id": run_id}

        try:
            start, slowest = auto_range(span, max_speed)
            cap = search(measure, slo, image=server.kind == "image", start=start, max_speed=max_speed, min_speed=slowest)
        except _TrialFailed as exc:
            rec["reason"] = str(exc)
            return rec
        finally:
            rec["probe_run_ids"] = runs  # every trial, retries and the failed one included
        state["workload"] = state.get("workload") or f"trace {spec['trace']} ({spec.get('digest')})"
        state["slo"], state["image"] = slo, server.kind == "image"
        rec["capacity"] = {"trace": spec["trace"], "knee": cap.knee, "low": cap.low, "high": cap.high,
                           "knees": cap.knees, "capped": cap.capped, "client_bound": cap.client_bound, "rate_rps": rate,
                           "steps": [{"speed": st.speed, "meets": st.meets, "why": st.why, "run_id": st.run_id}
                                     for st in cap.steps]}
        launch = repo.get_launch(self.engine, launch_id=launch_id) if launch_id else None
        if launch is not None and launch.ended_at is not None:
            rec["reason"] = f"the server stopped during the workload ({launch.end_reason or launch.status})"
            return rec
        knee_run = next((st.run_id for st in reversed(cap.steps) if st.meets and st.speed == cap.knee), None)
        scored: dict[str, Any] = {}
        if knee_run is not None:
            run = repo.get_probe_run(self.engine, run_id=knee_run)
            rec["levels"] = [lv.to_dict() for lv in SweepReport.of(run.report).levels] if run is not None else []
            try:
                scored = self.scorer(knee_run, server.name)
            except Exception as exc:  # a scorecard that cannot be built: the capacity still ranks
                rec["reason"] = f"its scorecard could not be built: {exc}"
        rec.update(status="scored", scorecard=scored.get("scorecard") or {})
        return rec

    def _sweep(self, intent: Intent, server: Server, launch_id: int | None,
               where: tuple[int, int, str], *, spec: dict[str, Any] | None = None,
               label: str | None = None) -> tuple[int, str, str]:
        """Store and run the candidate's ProbeRun (the intent's workload, or `spec`): (run id,
        final status, error)."""
        assert intent.id is not None
        spec = dict(spec if spec is not None else (intent.payload or {}).get("sweep") or {})
        spec.pop("slo", None)
        spec.update(url=server.base_url, server_id=server.id, launch_id=launch_id,
                    name=f"{request_label(intent.id, 'tune')}: {where[2]}" + (f" at {label}" if label else ""))
        run = repo.create_probe_run(self.engine, server_id=server.id, launch_id=launch_id, url=server.base_url,
                                    api=str(spec.get("api") or "generate"), name=spec["name"], spec=spec,
                                    status="pending")
        assert run.id is not None
        if server.api_key:
            spec["api_key"] = server.api_key  # the sweep process's spec file only; never stored
        intent_id = intent.id
        i, n, profile = where

        def progress(frac: float, status: str) -> None:
            self._progress(intent_id, i, n, profile, f"workload ({status})", 0.1 + 0.8 * frac, None)

        code, tail = self.sweeps.run(run_id=run.id, spec=spec, on_progress=progress)
        final = repo.get_probe_run(self.engine, run_id=run.id)
        status = final.status if final is not None else "failed"
        return run.id, status, (final.error if final is not None and final.error else tail)

    # -- the end ------------------------------------------------------------------------------------
    def _finish(self, intent: Intent, server: Server, state: dict[str, Any], apply: bool) -> None:
        assert intent.id is not None
        winner = tune_rank.rank(state["candidates"], state.get("slo") or {}, image=bool(state.get("image")))
        said = tune_rank.verdict(state["candidates"])
        state.update(winner=winner, tie=list(said.tied), verdict=said.text)
        target = winner if apply and winner else state["original_profile"]
        self._save(intent.id, state)
        n = len(state["candidates"])
        self._progress(intent.id, n, n, str(target), "restoring", 0.5, None)
        ok, _, why = self._relaunch(intent, server, str(target)) if target else (False, None, "no profile")
        state["restored_profile"] = target if ok else None
        self._save(intent.id, state)
        head = f"Tune of {server.name}: {n} candidate{'s' if n != 1 else ''}"
        head += f": {said.text.rstrip('.')}"
        if state.get("stopped"):
            head += " (stopped early)"
        tail = (f"; running {target} again" if ok else f"; putting {target} back failed: {why}")
        repo.update_intent(self.engine, intent_id=intent.id, state="done" if ok else "failed",
                           message=head + tail + ".", result=state,
                           progress={"stage": "done" if ok else "failed", "fraction": 1.0, "detail": head + tail})

    # -- helpers ------------------------------------------------------------------------------------
    def _current_profile(self, server: Server) -> str | None:
        assert server.id is not None
        launch = repo.latest_launch(self.engine, server_id=server.id)
        if launch is not None and launch.ended_at is None and launch.profile_name:
            return launch.profile_name
        return server.profile

    def _save(self, intent_id: int, state: dict[str, Any]) -> None:
        repo.update_intent(self.engine, intent_id=intent_id, result=state)

    def _stop_requested(self, intent_id: int) -> bool:
        got = repo.get_intent(self.engine, intent_id=intent_id)
        return bool(got is not None and (got.payload or {}).get("stop"))

    def _progress(self, intent_id: int, i: int, n: int, profile: str, stage: str, within: float,
                  eta_s: float | None) -> None:
        frac = (i + within) / max(n, 1) if i < n else 0.98
        detail = f"candidate {min(i + 1, n)}/{n} {profile}: {stage}"
        prog: dict[str, Any] = {"stage": stage, "fraction": round(min(frac, 0.99), 3), "detail": detail,
                                "candidate": min(i + 1, n), "of": n, "profile": profile}
        if eta_s is not None:
            self._eta_s[intent_id] = time.monotonic() + eta_s
        if intent_id in self._eta_s and i < n:
            prog["eta_s"] = max(0, round(self._eta_s[intent_id] - time.monotonic()))
        repo.update_intent(self.engine, intent_id=intent_id, progress=prog)

    @staticmethod
    def _eta(started: float, done: int, left: int) -> float | None:
        if done == 0:
            return None
        return (time.monotonic() - started) / done * left
