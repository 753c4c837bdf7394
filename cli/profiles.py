"""`pitwall profiles list|validate|diff` and `pitwall launch|stop|relaunch` (routed by cli.main).

Each function takes the rest of the command line and returns an exit code: 0 ok, 1 failed
(invalid profile, failed or refused action, no runner), 2 usage. Errors are one line on stderr.
Lifecycle commands write an Intent and follow its progress until it finishes; the runner
(`pitwall up` or `pitwall collect`) carries it out, one action per server at a time. With
`read_only` set (PITWALL_READ_ONLY) they refuse with one sentence and exit code 2, as the
dashboard hides its controls; `profiles list|validate|diff` change nothing and still work.

Nothing printed carries a secret (storage/redact.py): `list --json` and `diff` mask secret flags
and env (`api-key`, `HF_TOKEN`), messages and database URLs are redacted.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import Engine

from cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, CliError, open_db
from collectors.engines import DEFAULT_ENGINE, get_engine
from present.format import request_label
from storage.errors import PitwallError
from storage.redact import redact_obj, redact_text


def _run(func: Callable[[], int]) -> int:
    try:
        return func()
    except PitwallError as exc:  # a bad setting exits 2 (EXIT_USAGE), a CliError its own code
        print(f"pitwall: {redact_text(str(exc))}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130


def _context() -> tuple[Any, Engine]:
    from config.settings import load_settings

    settings = load_settings()
    return settings, open_db(settings)


def _actor() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except Exception:
        return "cli"


# ---------------------------------------------------------------------------------------------
# profiles


def profiles_cli(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="pitwall profiles", description="List, validate and diff launch profiles (profiles/*.toml).")
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    ls = sub.add_parser("list", help="every profile with its hash, model and flag count")
    ls.add_argument("--json", action="store_true", help="print JSON")
    va = sub.add_parser("validate", help="check a profile's flags, env and guardrails (exit 1 when invalid)")
    va.add_argument("profile", metavar="NAME|PATH")
    va.add_argument("--server", help="also run the guardrails (port, GPUs, tp x dp) for this server")
    default = get_engine(DEFAULT_ENGINE)
    va.add_argument("--bundled", action="store_true",
                    help=f"use the bundled {default.flags_version} flag table, not {default.display_name}'s parser")
    di = sub.add_parser("diff", help="what differs between two profiles")
    di.add_argument("a", metavar="A")
    di.add_argument("b", metavar="B")
    args = p.parse_args(argv)
    if not args.action:
        p.print_help()
        return EXIT_USAGE
    return _run(lambda: _profiles(args))


def _profiles(args: argparse.Namespace) -> int:
    from launching import launcher, profiles
    from storage import repo

    settings, engine = _context()
    if args.action == "list":
        specs, errors = profiles.load_dir(settings.profiles_dir)
        if args.json:
            print(json.dumps([{**redact_obj(s.canonical()), "hash": s.content_hash, "path": s.source_path}
                              for s in specs], indent=2))
        else:
            for s in specs:
                print(f"{s.name:<20} {s.content_hash}  {s.model_path:<32} {len(s.flags):>2} flags  {s.description[:60]}")
        for err in errors:
            print(f"pitwall: {err}", file=sys.stderr)
        return EXIT_FAIL if errors else EXIT_OK
    if args.action == "validate":
        spec = _resolve(engine, settings, args.profile)
        server = None
        if args.server:
            server = repo.get_server(engine, name=args.server)
            if server is None:
                raise CliError(f"No server named {args.server!r}; see `pitwall status`.")
        report = launcher.validate(spec, server, use_real_parser=not args.bundled,
                                   sandbox=launcher.sandbox_for(settings, engine))
        print(f"{spec.name}: checked by {report.checked_by}")
        for line in report.lines():
            print(f"  {redact_text(line)}")
        if report.ok:
            print(f"{spec.name}: valid")
            return EXIT_OK
        print(f"pitwall: profile {spec.name} is invalid ({len(report.errors)} error(s)).", file=sys.stderr)
        return EXIT_FAIL
    a = _resolve(engine, settings, args.a)
    b = _resolve(engine, settings, args.b)
    from present import shown

    rows = shown.diff_rows(profiles.diff(a.canonical(), b.canonical()))
    if not rows:
        print(f"{a.name} and {b.name} launch the same server (no differences).")
        return EXIT_OK
    width = max(len(k) for k, _, _ in rows)
    print(f"{'':<{width}}  {a.name:<24} {b.name}")
    for key, va, vb in rows:
        print(f"{key:<{width}}  {_show(va):<24} {_show(vb)}")
    return EXIT_OK


def _show(v: Any) -> str:
    return "—" if v is None else json.dumps(v) if not isinstance(v, str) else v


def _resolve(engine: Engine, settings: Any, name: str) -> Any:
    from launching import profiles

    try:
        return profiles.resolve(engine, settings.profiles_dir, name)
    except profiles.ProfileError as exc:
        raise CliError(str(exc)) from None


# ---------------------------------------------------------------------------------------------
# launch / stop / relaunch


def _lifecycle_parser(kind: str) -> argparse.ArgumentParser:
    helps = {
        "launch": "Start a managed server under a profile (through the runner).",
        "stop": "Stop a managed server (SIGTERM to its process group, then SIGKILL).",
        "relaunch": "Stop a managed server and start it under a profile; if the new profile does "
                    "not come up, the last good profile is started again (rollback).",
    }
    p = argparse.ArgumentParser(
        prog=f"pitwall {kind}", description=helps[kind],
        epilog="One lifecycle action per server at a time: a request while another is pending or "
               "running for that server is refused.",
    )
    p.add_argument("server", metavar="SERVER")
    if kind != "stop":
        p.add_argument("--profile", help="profile name (default: the server's current profile, the one its "
                                         "latest launch runs under; else its configured one)"
                       if kind == "relaunch" else "profile name (default: the server's configured one)")
        p.add_argument("--ready-timeout", type=float, default=None,
                       help="seconds the new server has to become ready (default 600)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds to follow progress (default 900)")
    p.add_argument("--no-wait", action="store_true", help="record the request and return")
    return p


def _lifecycle(kind: str, argv: list[str]) -> int:
    args = _lifecycle_parser(kind).parse_args(argv)
    return _run(lambda: _do_lifecycle(kind, args))


def _do_lifecycle(kind: str, args: argparse.Namespace) -> int:
    from dashboard.services.views import health
    from launching import launcher

    settings, engine = _context()
    if settings.read_only:
        raise CliError(f"Pitwall is read-only (read_only / PITWALL_READ_ONLY), so `pitwall {kind}` is refused; "
                    "unset it to change servers.", EXIT_USAGE)
    if not health.runner_alive(engine):
        raise CliError(f"No runner is alive on the database {health.shown_url(settings.database_url)} "
                    f"(config: {settings.config_path or 'none'}) to carry this out; start the runner with "
                    "`pitwall up`, or point this command at the page's pitwall.toml with PITWALL_CONFIG.")
    try:
        intent = launcher.request(engine, kind=kind, server_name=args.server, actor=_actor(),
                                  profile=getattr(args, "profile", None),
                                  timeout_s=getattr(args, "ready_timeout", None))
    except launcher.LauncherError as exc:
        raise CliError(str(exc)) from None
    assert intent.id is not None
    print(f"{kind} of {args.server} requested ({request_label(intent.id, kind)}).", flush=True)
    if args.no_wait:
        return EXIT_OK

    def show(i: Any) -> None:
        prog = i.progress or {}
        if prog:
            print(f"  {prog.get('stage', i.state):<13} {100 * float(prog.get('fraction') or 0):5.1f} %  "
                  f"{redact_text(str(prog.get('detail', '')))}", flush=True)

    final = launcher.follow(engine, intent.id, timeout_s=args.timeout, on_progress=show)
    if final is None or final.state not in launcher.FINAL_STATES:
        raise CliError(f"{request_label(intent.id, kind, start=True)} is still {final.state if final else 'missing'} after {args.timeout:.0f} s; follow it on the Profiles page.")
    if final.state == "done":
        print(redact_text(final.message or "done"))
        return EXIT_OK
    raise CliError(final.message or f"{kind} {final.state}")


def launch_cli(argv: list[str]) -> int:
    return _lifecycle("launch", argv)


def stop_cli(argv: list[str]) -> int:
    return _lifecycle("stop", argv)


def relaunch_cli(argv: list[str]) -> int:
    return _lifecycle("relaunch", argv)
