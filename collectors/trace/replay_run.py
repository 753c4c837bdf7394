"""`pitwall probe --trace NAME`: replay a stored trace against a server and store the run.

    pitwall probe --url URL --trace NAME [--speed X] [--window A..B] [--max-requests N]
                  [--api generate|chat|completions|images] [--json] [--no-store]

The run is a ProbeRun (its report below, `mode: "trace"`) with one ProbeRequest per request sent,
whose `ttft_s` / `e2e_s` count from the request's due time (collectors/trace/replay.py) and whose
`detail` holds `trace_seq`, `due_s`, `lag_s`, `session`, `turn`. The workload fingerprint names the
trace's digest, the speed and the window, so runs on different traffic are never compared silently.

Report keys: `requests`, `ok`, `errors` (by kind), `success_rate`; `ttft_s`, `itl_s`, `e2e_s`
({p50, p95, p99, mean, max}, seconds, TTFT and E2E from the due time); `schedule_lag_s` (send -
due) with `lag_bound_s`, `trusted` and `untrusted_reason`; `offered_rps` (the trace at this speed),
`achieved_rps` (sends over the send span), `output_tok_s`; `tokens_in`, `tokens_out` (as the
server counted them) and `expected_tokens_out` (the trace's); `trace` {name, digest, requests},
`speed`, `window`, `skipped_failed`, `notes`; and `levels`: the run as one open-loop level at the
offered rate in the sweep report's shape (its self-check is the schedule lag), so Benchmarks,
Compare and the scorecard read a replay as they read a sweep.
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
from typing import Any

from sqlalchemy.engine import Engine

from collectors.probe.fingerprint import fingerprint_hash
from collectors.trace.model import TraceError, TraceRequest
from collectors.trace.replay import (
    Plan,
    ReplayOptions,
    apis,
    calibrate,
    plan,
    replay,
    report,
    span_s,
)
from storage import repo

AUTO_TRIAL_S = 30.0  # --speed auto starts where one replay lasts about this long (at least 1x)
MAX_TRIAL_S = 240.0  # ... and goes no slower than where one lasts this long (nor below 1/64x)


def auto_range(span: float, max_speed: float) -> tuple[float, float]:
    """(first speed, slowest speed) of a `--speed auto` search over a window of `span` seconds:
    a first replay of about AUTO_TRIAL_S, none longer than MAX_TRIAL_S (a server that meets the
    SLO at no speed of an hour's window would otherwise take days to say so)."""
    start = min(float(f"{max(1.0, span / AUTO_TRIAL_S):.2g}"), max_speed)
    return start, min(start, max(1 / 64, span / MAX_TRIAL_S))


_REQUEST_FIELDS = ("seq", "arrival_s", "input_tokens", "output_tokens", "hash_ids", "session", "turn", "api",
                   "sampling", "cached_tokens", "status", "images", "source_latency_s", "line")


def parse_window(text: str | None) -> tuple[float | None, float | None]:
    """'A..B', 'A..' or '..B' in the trace's seconds -> (A, B)."""
    if not text:
        return None, None
    if ".." not in text:
        raise ValueError(f"--window {text!r}: use A..B in seconds of the trace, e.g. 0..600 (either side may be left out)")
    a, b = text.split("..", 1)
    try:
        start, end = (float(a) if a.strip() else None), (float(b) if b.strip() else None)
    except ValueError:
        raise ValueError(f"--window {text!r}: A and B are seconds, e.g. 60..660") from None
    if start is not None and end is not None and end <= start:
        raise ValueError(f"--window {text!r}: the end must be after the start")
    return start, end


def load(engine: Engine, name: str) -> tuple[Any, list[TraceRequest]]:
    trace = repo.get_trace(engine, name=name)
    if trace is None:
        names = ", ".join(t.name for t in repo.list_traces(engine)) or "none"
        raise TraceError(f"No trace named {name!r}; stored: {names}. `pitwall trace import FILE` stores one.")
    assert trace.id is not None
    rows = repo.trace_requests(engine, trace_id=trace.id, columns=_REQUEST_FIELDS)
    return trace, [TraceRequest(**row) for row in rows]


def fingerprint_detail(api: str, model: str | None, trace: Any, options: ReplayOptions) -> dict[str, Any]:
    return {"api": api, "model": model, "mode": "trace", "ignore_eos": True,
            "trace": {"name": trace.name, "digest": trace.digest, "speed": options.speed,
                      "window": [options.start_s, options.end_s], "max_requests": options.max_requests}}


def stored_spec(trace: Any, options: ReplayOptions, p: Plan) -> dict[str, Any]:
    """The run's spec: what replays it again (`run_spec`, a rerun from Benchmarks) and what the
    runs table shows (the workload, the one level: the offered rate)."""
    return {"trace": trace.name, "trace_id": trace.id, "digest": trace.digest, "speed": options.speed,
            "window": [options.start_s, options.end_s], "max_requests": options.max_requests,
            "api": options.api, "model": options.model, "mode": "rate", "prompt_seed": options.seed,
            "workload": {"prompt_set": f"trace {trace.name} at {options.speed:g}x"},
            "levels": [p.offered_rps or 0.0],
            "requests": len(p.items)}


def run(engine: Engine | None, *, url: str, trace: Any, requests: list[TraceRequest], options: ReplayOptions,
        server_id: int | None = None, launch_id: int | None = None, name: str | None = None,
        on_progress: Any = None, run_id: int | None = None) -> tuple[int | None, dict[str, Any]]:
    """Calibrate, replay, store (when `engine`: a new run, or the pending run `run_id` a page
    recorded), and return (run id, report)."""
    wanted = apis(requests, options)
    calibration, notes = asyncio.run(calibrate(url, wanted, options)) if wanted else ({}, [])
    p: Plan = plan(requests, trace.block_size, options, calibration)
    p.notes.extend(notes)
    if not p.items:
        raise TraceError(f"Nothing to replay: the window and cap leave no request of trace {trace.name!r}.")
    api = options.api or ("mixed" if len({d.api for d in p.items}) > 1 else p.items[0].api)
    detail = fingerprint_detail(api, options.model, trace, options)
    fields: dict[str, Any] = {"url": url, "api": api, "spec": stored_spec(trace, options, p),
                              "fingerprint": fingerprint_hash(detail), "fingerprint_detail": detail,
                              "status": "running", "started_at": time.time()}
    if engine is not None and run_id is None:
        run_id = repo.create_probe_run(engine, server_id=server_id, launch_id=launch_id,
                                       name=name or f"trace {trace.name}", **fields).id
    elif engine is not None and run_id is not None:
        repo.update_probe_run(engine, run_id=run_id, **fields)
    done = [0]

    def count(n: int, total: int) -> None:  # in the replay's event loop: no I/O here
        done[0] = n
        if on_progress is not None:
            on_progress(n, total)

    writer = _ProgressWriter(engine, run_id, len(p.items), done) if engine is not None and run_id is not None else None
    gc.collect()  # as a sweep level does: no collection pause inside a measured latency
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        sent = asyncio.run(replay(url, p, options, count))
    except BaseException as exc:
        if engine is not None and run_id is not None:
            repo.update_probe_run(engine, run_id=run_id, status="failed", finished_at=time.time(),
                                  error=f"the replay stopped: {type(exc).__name__}: {exc}"[:500])
        raise
    finally:
        if was_enabled:
            gc.enable()
        if writer is not None:
            writer.stop()
    rep = report(sent, p, options)
    rep["trace"] = {"name": trace.name, "digest": trace.digest, "requests": len(requests)}
    if engine is not None and run_id is not None:
        with engine.begin() as conn:
            repo.insert_probe_requests(conn, rows=[s.record.row(run_id) for s in sent])
        repo.update_probe_run(engine, run_id=run_id, status="done", progress=1.0, finished_at=time.time(),
                              report=json.loads(json.dumps(rep, default=float)), trusted=rep["trusted"])
    return run_id, rep


class _ProgressWriter:
    """ProbeRun.progress (answered / planned) written once a second from a thread of its own: the
    replay's event loop sends on schedule and never waits on the database."""

    def __init__(self, engine: Engine, run_id: int, total: int, done: list[int], every_s: float = 1.0) -> None:
        import threading

        self._stop = threading.Event()

        def loop() -> None:
            last = -1
            while not self._stop.wait(every_s):
                if done[0] != last:
                    last = done[0]
                    try:
                        repo.update_probe_run(engine, run_id=run_id, only_if_status="running",
                                              progress=min(0.99, last / max(1, total)))
                    except Exception:  # a locked database: the next second tries again
                        pass

        self._thread = threading.Thread(target=loop, name="replay-progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)


def fresh_seed() -> int:
    """A prompt seed no earlier run used (in all likelihood): the synthetic prompts of a replay are
    its own, so it never finds an earlier replay's prompts in the server's prefix cache (a second
    replay of one trace on one server would otherwise prefill almost nothing, and look faster)."""
    import secrets

    return secrets.randbelow(2**31)


def options_of(spec: dict[str, Any]) -> ReplayOptions:
    """A stored replay spec's options (the speed a number: --speed auto stores one run per speed);
    its `seed` when the asker pinned one, else a fresh one (`prompt_seed` records what a run used;
    a rerun of its spec gets new prompts)."""
    window = spec.get("window") or [None, None]
    speed = float(spec.get("speed") or 1.0)
    if not speed > 0:
        raise TraceError(f"The replay's speed is {spec.get('speed')!r}; it must be above 0.")
    return ReplayOptions(speed=speed, start_s=window[0], end_s=window[1], max_requests=spec.get("max_requests"),
                         api=spec.get("api"), model=spec.get("model"),
                         timeout_s=float(spec.get("timeout_s") or 300.0),
                         api_key=spec.get("api_key"),
                         seed=fresh_seed() if spec.get("seed") is None else int(spec["seed"]))


def run_spec(engine: Engine, spec: dict[str, Any], run_id: int) -> dict[str, Any]:
    """Replay the stored run `run_id` as its spec says (the runner's sweep process: a replay
    started from a page, a rerun, a tune's trial); the report."""
    trace, requests = load(engine, str(spec["trace"]))
    if spec.get("digest") and spec["digest"] != trace.digest:
        raise TraceError(f"Trace {trace.name!r} changed since this replay was asked for (digest {spec['digest']}, "
                         f"now {trace.digest}); start it again to replay the stored one.")
    _, rep = run(engine, url=str(spec["url"]), trace=trace, requests=requests, options=options_of(spec),
                 server_id=spec.get("server_id"), launch_id=spec.get("launch_id"), run_id=run_id)
    return rep


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{1000 * v:,.1f} ms"


def format_report(rep: dict[str, Any]) -> str:
    t = rep["trace"]
    lines = [
        f"trace {t['name']} ({t['digest']}) at {rep['speed']:g}x: {rep['requests']:,} requests sent, "
        f"{rep['ok']:,} ok ({100 * (rep['success_rate'] or 0):.1f} %)"
        + (f"; errors {', '.join(f'{k} {v}' for k, v in rep['errors'].items())}" if rep["errors"] else ""),
        f"  TTFT from the due time p50 {_ms(rep['ttft_s'].get('p50'))} p99 {_ms(rep['ttft_s'].get('p99'))}; "
        f"ITL p50 {_ms(rep['itl_s'].get('p50'))} p99 {_ms(rep['itl_s'].get('p99'))}; "
        f"E2E p50 {_ms(rep['e2e_s'].get('p50'))} p99 {_ms(rep['e2e_s'].get('p99'))}",
        f"  offered {rep['offered_rps'] or 0:.2f} req/s, achieved {rep['achieved_rps'] or 0:.2f} req/s; "
        f"output {rep['output_tok_s'] or 0:,.1f} tok/s; tokens out {rep['tokens_out']:,} of {rep['expected_tokens_out']:,} asked",
        f"  schedule lag p50 {_ms(rep['schedule_lag_s'].get('p50'))} p99 {_ms(rep['schedule_lag_s'].get('p99'))} "
        f"(bound {_ms(rep['lag_bound_s'])}): " + ("trusted" if rep["trusted"] else f"NOT trusted: {rep['untrusted_reason']}"),
    ]
    lines.extend(f"  note: {n}" for n in rep["notes"])
    return "\n".join(lines)


def trace_cli(args: Any, *, explicit_api: bool, default_db: Any, attach: Any, api_key_from: Any,
              open_engine: Any) -> int:
    """`pitwall probe --trace`: the probe CLI hands its parsed arguments here, with its helpers
    (the database default and opener, the API key reader, the attach rule)."""
    import sys

    from storage.errors import PitwallError
    from storage.redact import redact_text

    if args.concurrency or args.rate:
        print("pitwall probe: --trace replays the trace's own arrivals; leave out --concurrency / --rate "
              "(--speed scales them).", file=sys.stderr)
        return 2
    try:
        start, end = parse_window(args.window)
        auto = str(args.speed).strip().lower() == "auto"
        speed = 1.0 if auto else _speed(args.speed)
        slo = _slo(args.slo) if auto else {}
        if not args.max_speed > 0:
            raise ValueError("--max-speed must be > 0")
        if args.max_requests is not None and args.max_requests <= 0:
            raise ValueError("--max-requests must be positive")
        key = api_key_from(args)
    except ValueError as exc:
        print(f"pitwall probe: {exc}", file=sys.stderr)
        return 2
    options = ReplayOptions(speed=speed, start_s=start, end_s=end, max_requests=args.max_requests,
                            api=args.api if explicit_api else None, model=args.model, timeout_s=args.timeout,
                            api_key=key, seed=fresh_seed() if args.seed is None else args.seed)
    try:
        engine = open_engine(args.db or default_db())
        trace, requests = load(engine, args.trace)
        server_id = launch_id = None
        attached = ""
        if not args.no_store:
            server_id, launch_id, attached = attach(engine, args.url)
        store = None if args.no_store else engine
        if auto:
            return _auto(args, store, trace, requests, options, slo, server_id, launch_id, attached)
        run_id, rep = run(store, url=args.url, trace=trace, requests=requests,
                          options=options, server_id=server_id, launch_id=launch_id, name=args.name)
    except PitwallError as exc:
        print(f"pitwall probe: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("pitwall probe: interrupted; the run is stored as failed.", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"pitwall probe: the replay failed ({redact_text(str(exc))}).", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({**rep, "run_id": run_id}, indent=2, default=float))
    else:
        print(f"run {run_id or '(not stored)'}" + (f" {attached}" if attached else ""))
        print(format_report(rep))
    return 0


def _speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"--speed {text!r}: a number (2 = twice as fast) or auto") from None
    if not value > 0:
        raise ValueError("--speed must be > 0")
    return value


def _slo(text: str | None) -> dict[str, float]:
    if not text:
        raise ValueError("--speed auto needs the SLO: run it as `pitwall probe`, which reads [slo] from pitwall.toml")
    targets = json.loads(text)
    wanted = {k: float(v) for k, v in targets.items() if k in ("ttft_p99_s", "itl_p99_s", "image_p99_s", "success_rate")}
    if not wanted:
        raise ValueError("--speed auto: [slo] sets none of ttft_p99_s, itl_p99_s, image_p99_s, success_rate")
    return wanted


def _auto(args: Any, engine: Engine | None, trace: Any, requests: list[TraceRequest], options: ReplayOptions,
          slo: dict[str, float], server_id: int | None, launch_id: int | None, attached: str) -> int:
    """The capacity search: one stored run per speed tried, the sentence at the end."""
    import dataclasses
    import sys

    from collectors.trace.capacity import search

    image = options.api == "images" or all(r.api == "images" for r in requests)

    trials = [0]

    def measure(speed: float) -> dict[str, Any]:
        trials[0] += 1  # each trial its own prompts: none finds an earlier trial's in the prefix cache
        run_id, rep = run(engine, url=args.url, trace=trace, requests=requests,
                          options=dataclasses.replace(options, speed=speed, seed=options.seed + trials[0]),
                          server_id=server_id, launch_id=launch_id,
                          name=f"{args.name or 'trace ' + trace.name} at {speed:.3g}x")
        print(f"  {speed:.3g}x: TTFT p99 {_ms(rep['ttft_s'].get('p99'))}, ITL p99 {_ms(rep['itl_s'].get('p99'))}, "
              f"ok {100 * (rep['success_rate'] or 0):.1f} %, lag p99 {_ms(rep['schedule_lag_s'].get('p99'))}",
              file=sys.stderr, flush=True)
        return {**rep, "run_id": run_id}

    start, slowest = auto_range(span_s(requests, options), args.max_speed)
    result = search(measure, slo, image=image, start=start, max_speed=args.max_speed, min_speed=slowest)
    server = attached.split("attached to server ", 1)[1].split(" ", 1)[0] if attached.startswith("attached to server ") \
        else args.url
    sentence = result.sentence(server, trace.name)
    if args.json:
        print(json.dumps({"knee": result.knee, "low": result.low, "high": result.high, "knees": result.knees,
                          "capped": result.capped, "client_bound": result.client_bound, "slo": slo, "sentence": sentence,
                          "steps": [dataclasses.asdict(s) for s in result.steps]}, indent=2))
    else:
        print(sentence)
    return 0 if result.knee is not None else 1
