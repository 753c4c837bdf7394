"""`pitwall probe`: run a probe / load sweep from the command line.

    pitwall probe --url URL --api generate|completions|chat|images
                  (--concurrency 1,4,8,16 | --rate 2,4,8) [--requests N] [--max-new-tokens N]
                  [--prompt-set builtin|synthetic|shared-prefix|multi-turn|fork|FILE.jsonl]
                  [--turns N] [--branches K] [--conversations N]
                  [--structured json-schema|regex|ebnf [--schema FILE | --pattern RE]]
                  [--json] [--no-store]
                  [--db URL] [--baseline RUN_ID] [--api-key-file PATH] ...
    pitwall probe --url URL --trace NAME [--speed X] [--window A..B] [--max-requests N]
                  (a stored trace replayed open-loop: collectors/trace/replay_run.py)

The server's API key comes from `--api-key-file PATH` (first line of the file) or the
environment (PITWALL_API_KEY, or the older PITWALL_PROBE_API_KEY); `--api-key KEY` still works
but puts the key where `ps` shows it to every user, so it warns once on stderr.

Shows a progress bar on stderr, stores the run (ProbeRun + ProbeRequest rows) unless --no-store,
prints a table, or with --json exactly `report.public_report()`. A stored run is attached to the
configured server whose base URL is the one probed (same scheme, host and port; `localhost` is
127.0.0.1) and to that server's current launch, so Compare and the scorecard find it; a URL that
no configured server has, or that several have, leaves the run unattached. Which one it was is
said on stdout (on stderr with --json). Exit codes: 0 done, 1 the sweep
was aborted (error rate) or failed, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from sqlalchemy.engine import Engine

from collectors.probe.report import format_table, format_workload, public_report
from collectors.probe.structured import KINDS, StructuredError, load_spec
from collectors.probe.sweep import SweepSpec, run_sweep
from collectors.probe.trust import run_note
from collectors.probe.workloads import WorkloadError, WorkloadSpec, api_paths
from storage.redact import redact_text, redact_url


def default_db_url() -> str:
    """PITWALL_DATABASE_URL, else <PITWALL_DATA_DIR or ~/.local/share/pitwall>/pitwall.db (the
    defaults of config/settings.py, which collectors/ may not import; pitwall.toml is not read
    here, so the `pitwall` CLI should pass --db from its Settings)."""
    url = os.environ.get("PITWALL_DATABASE_URL")
    if url:
        return url
    data_dir = Path(os.environ.get("PITWALL_DATA_DIR") or "~/.local/share/pitwall").expanduser().resolve()
    return f"sqlite:///{data_dir / 'pitwall.db'}"


def open_engine(url: str) -> Engine:
    """The database through storage.db.make_engine (pragmas, schema checks)."""
    from storage.db import make_engine

    return make_engine(url)


def _address(url: str) -> tuple[str, str, int | None, str]:
    """(scheme, host, port, path) of a base URL, compared the same however it is spelled."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return ("", url, None, "")
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    host = "127.0.0.1" if host in ("localhost", "::1") else host
    return (scheme, host, port or {"http": 80, "https": 443}.get(scheme), parts.path.rstrip("/"))


def attach(engine: Engine, url: str) -> tuple[int | None, int | None, str]:
    """(server_id, launch_id, a sentence saying which) for a run that probed `url`: the one
    configured server with that base URL and its current launch (None when it has none running);
    (None, None, why) when no server or more than one has that address."""
    from storage import repo

    want = _address(url)
    found = [s for s in repo.list_servers(engine) if s.base_url and _address(s.base_url) == want]
    if not found:
        return None, None, (f"not attached to a server: no configured server has the address "
                            f"{redact_url(url)}; Compare lists it as a run without a server.")
    if len(found) > 1:
        names = ", ".join(s.name for s in found)
        return None, None, (f"not attached to a server: {names} all have the address "
                            f"{redact_url(url)}; give each server its own base_url.")
    server = found[0]
    assert server.id is not None
    launch = repo.latest_launch(engine, server_id=server.id)
    if launch is None or launch.ended_at is not None:
        return server.id, None, f"attached to server {server.name} (it has no current launch)."
    return server.id, launch.id, (f"attached to server {server.name} and its current launch "
                                  f"(profile {launch.profile_name or 'none'}).")


def _levels(text: str, kind: type) -> list[float]:
    try:
        vals = [kind(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of numbers") from None
    if not vals or any(v <= 0 for v in vals):
        raise argparse.ArgumentTypeError("levels must be positive numbers, e.g. 1,4,8,16")
    return [float(v) for v in vals]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pitwall probe", description="Run a probe / load sweep against a server.")
    p.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:30000")
    p.add_argument("--api", choices=tuple(api_paths()), default="generate")
    load = p.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=lambda s: _levels(s, int), help="closed-loop levels (default 1,4,8,16)")
    load.add_argument("--rate", type=lambda s: _levels(s, float), help="open-loop Poisson levels, requests/s")
    p.add_argument("--requests", type=int, default=None, help="measured requests per level (default max(50, 5 x level))")
    p.add_argument("--warmup", type=int, default=None, help="warm-up requests per level (default: the level)")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--ignore-eos", action="store_true")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--model", default=None, help="model name (default: asked from /v1/models)")
    p.add_argument("--prompt-set", default="builtin",
                   help="builtin | synthetic | shared-prefix | multi-turn | fork | FILE.jsonl")
    p.add_argument("--turns", type=int, default=4, help="multi-turn: turns per conversation")
    p.add_argument("--branches", type=int, default=4, help="fork: parallel branches per shared context")
    p.add_argument("--conversations", type=int, default=8, help="multi-turn conversations / fork contexts")
    p.add_argument("--structured", choices=KINDS, default=None,
                   help="constrain every output (json-schema, regex, ebnf) and check it")
    p.add_argument("--schema", metavar="FILE", default=None, help="JSON Schema file (default: a bundled extraction schema)")
    p.add_argument("--pattern", metavar="RE", default=None, help="regex or EBNF grammar text for --structured regex|ebnf")
    p.add_argument("--input-tokens", type=int, default=128, help="synthetic prompt length, words (~tokens)")
    p.add_argument("--num-prompts", type=int, default=32, help="synthetic prompt count")
    p.add_argument("--prefix-tokens", type=int, default=512, help="shared-prefix template length")
    p.add_argument("--prefix-templates", type=int, default=4)
    p.add_argument("--suffixes", type=int, default=8, help="shared-prefix suffixes per template")
    p.add_argument("--image-size", default="512x512")
    p.add_argument("--image-steps", type=int, default=None)
    p.add_argument("--timeout", type=float, default=120.0, help="per-request timeout, seconds")
    p.add_argument("--max-duration", type=float, default=None, help="per-level time limit, seconds")
    p.add_argument("--abort-error-rate", type=float, default=0.5, help="stop when this fraction fails (after 10 requests)")
    key = p.add_mutually_exclusive_group()
    key.add_argument("--api-key-file", metavar="PATH", default=None,
                     help="read the server's API key (bearer token) from this file's first line")
    key.add_argument("--api-key", default=None,
                     help="the API key itself: visible in `ps`; prefer --api-key-file or PITWALL_API_KEY")
    p.add_argument("--baseline", type=int, default=None, help="ProbeRun id to compare outputs with")
    p.add_argument("--name", default=None)
    p.add_argument("--seed", type=int, default=None,
                   help="prompt seed (default 0; a trace replay: a fresh one, so no run reuses another's KV cache)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--no-store", action="store_true", help="do not store the run")
    p.add_argument("--db", default=None, help="database URL (default: PITWALL_DATABASE_URL or the data dir)")
    p.add_argument("--no-progress", action="store_true")
    replay = p.add_argument_group("trace replay (pitwall trace import stores traces)")
    replay.add_argument("--trace", metavar="NAME", default=None,
                        help="replay this stored trace open-loop instead of a sweep")
    replay.add_argument("--speed", default="1", help="replay X times faster than recorded (default 1); auto: the "
                        "highest speed within [slo] (grow, bisect, repeated 3 times for an interval)")
    replay.add_argument("--max-speed", type=float, default=1024.0,
                        help="--speed auto tries no speed above this (default 1024)")
    replay.add_argument("--slo", default=None, help=argparse.SUPPRESS)  # {key: target}, from `pitwall probe`
    replay.add_argument("--window", metavar="A..B", default=None, help="only the trace's requests arriving in A..B s")
    replay.add_argument("--max-requests", type=int, default=None, help="replay at most N requests")
    return p


API_KEY_ENV = ("PITWALL_API_KEY", "PITWALL_PROBE_API_KEY")
ARGV_KEY_WARNING = ("pitwall probe: warning: --api-key shows the key to every user in `ps`; "
                    "use --api-key-file PATH or PITWALL_API_KEY.")


def api_key_from(args: argparse.Namespace, environ: dict[str, str] | None = None) -> str | None:
    """The API key: --api-key-file, else --api-key (with a warning on stderr), else the
    environment (API_KEY_ENV, first set wins). Raises ValueError when the file cannot be read."""
    if args.api_key_file:
        try:
            text = Path(args.api_key_file).expanduser().read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read --api-key-file {args.api_key_file} ({exc.strerror or exc})") from None
        key = text.strip().splitlines()[0].strip() if text.strip() else ""
        if not key:
            raise ValueError(f"--api-key-file {args.api_key_file} is empty; put the key on its first line")
        return key
    if args.api_key:
        print(ARGV_KEY_WARNING, file=sys.stderr)
        return str(args.api_key)
    env = os.environ if environ is None else environ
    return next((env[k] for k in API_KEY_ENV if env.get(k)), None)


def spec_from_args(args: argparse.Namespace) -> SweepSpec:
    mode, levels = ("rate", args.rate) if args.rate else ("concurrency", args.concurrency or [1.0, 4.0, 8.0, 16.0])
    if args.structured is None and (args.schema or args.pattern):
        raise StructuredError("--schema / --pattern need --structured json-schema|regex|ebnf.")
    constraint = (load_spec(args.structured, schema_file=args.schema, pattern=args.pattern)
                  if args.structured else None)
    wl = WorkloadSpec(
        prompt_set=args.prompt_set, input_tokens=args.input_tokens, num_prompts=args.num_prompts,
        prefix_templates=args.prefix_templates, suffixes_per_template=args.suffixes,
        prefix_tokens=args.prefix_tokens, seed=args.seed or 0, max_new_tokens=args.max_new_tokens,
        ignore_eos=args.ignore_eos, temperature=args.temperature, top_p=args.top_p,
        top_k=args.top_k, model=args.model, image_size=args.image_size, image_steps=args.image_steps,
        structured=args.structured, structured_spec=constraint, turns=args.turns,
        branches=args.branches, conversations=args.conversations,
    )
    return SweepSpec(
        url=args.url, api=args.api, mode=mode, levels=levels, requests=args.requests,
        warmup=args.warmup, timeout_s=args.timeout, max_duration_s=args.max_duration,
        abort_error_rate=args.abort_error_rate, api_key=args.api_key, workload=wl, seed=args.seed or 0,
        baseline_run_id=args.baseline, name=args.name,
    )


class ProgressBar:
    """A one-line progress bar on stderr, redrawn at most 10 times a second."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._last = 0.0

    def __call__(self, done: int, total: int, label: str) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self._last < 0.1 and done < total):
            return
        self._last = now
        frac = done / max(total, 1)
        bar = "#" * int(frac * 30)
        sys.stderr.write(f"\r[{bar:<30}] {frac:4.0%} {done}/{total} {label:<10}")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


def probe_cli(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.trace is not None:
        from collectors.trace.replay_run import trace_cli

        explicit_api = any(a == "--api" or a.startswith("--api=") for a in argv)
        return trace_cli(args, explicit_api=explicit_api, default_db=default_db_url, attach=attach,
                         api_key_from=api_key_from, open_engine=open_engine)
    try:
        args.api_key = api_key_from(args)
        spec = spec_from_args(args)
        spec.validate()
    except (ValueError, WorkloadError) as exc:
        print(f"pitwall probe: {exc}", file=sys.stderr)
        return 2
    engine = None
    if not args.no_store:
        try:
            args.db = args.db or default_db_url()
            engine = open_engine(args.db)
        except Exception as exc:
            print(f"pitwall probe: cannot open the database {redact_url(args.db)} "
                  f"({redact_text(str(exc))}); pass --db or --no-store.", file=sys.stderr)
            return 2
    attached = ""
    if engine is not None:
        spec.server_id, spec.launch_id, attached = attach(engine, spec.url)
    bar = ProgressBar(enabled=not args.no_progress and sys.stderr.isatty())
    try:
        typed = asyncio.run(run_sweep(spec, engine=engine, on_progress=bar))
    except WorkloadError as exc:
        bar.close()
        print(f"pitwall probe: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        bar.close()
        print("pitwall probe: interrupted; the run is stored as failed.", file=sys.stderr)
        return 1
    except Exception as exc:
        bar.close()
        print(f"pitwall probe: the sweep failed ({type(exc).__name__}: {redact_text(str(exc))}).",
              file=sys.stderr)
        return 1
    bar.close()
    if args.json:
        print(json.dumps(public_report(typed), indent=2))
        if attached:
            print(f"pitwall probe: run {typed.run_id} {attached}", file=sys.stderr)
    else:
        print(f"fingerprint {typed.fingerprint}  run {typed.run_id or '(not stored)'}  status {typed.status}")
        if attached:
            print(f"run {typed.run_id} {attached}")
        print(format_table(typed))
        note = run_note(typed.levels)
        if note:
            print(note)
        extra = format_workload(typed)
        if extra:
            print(extra)
        cons = typed.consistency
        if cons:
            print(f"consistency vs run {cons['baseline_run_id']}: {cons.get('differing')} of "
                  f"{cons.get('compared')} outputs differ" + (f" ({'; '.join(cons['warnings'])})" if cons.get("warnings") else ""))
    if typed.error:
        print(f"pitwall probe: {typed.error}", file=sys.stderr)
    return 0 if typed.status == "done" else 1
