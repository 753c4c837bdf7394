"""The `pitwall` command line. `main(argv) -> int`; errors are one readable line, never a traceback.

Subcommands:
  up            start the runner and the dashboard (what `make run` calls)
  collect       run the runner in the foreground (collectors, supervisor, intents)
  status        runner, database and servers at a glance
  parse-log     parse a saved engine log (JSON lines; --engine NAME, default the default engine)
  parse-metrics parse a saved /metrics payload (JSON; --engine NAME as parse-log)
  probe         run a probe / load sweep against a server
  profiles      list, validate and diff launch profiles
  launch / stop / relaunch   manage a managed server through the runner
  tune          find the best profile: relaunch per candidate, same workload, ranked
  export        export a scorecard (md, html, csv, json)
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Callable

from cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, CliError, open_db
from config import __version__
from config.settings import REPO_ROOT, Settings, load_settings
from storage.errors import PitwallError

RUNNER_STOP_TIMEOUT_S = 120.0


def _private_dirs(settings: Settings) -> None:
    """The data dir and its logs/ folder are Pitwall's own: 0700 (storage/files.py)."""
    from storage.files import private_dir

    private_dir(settings.data_dir, own=True)
    private_dir(settings.logs_dir, own=True)


# --------------------------------------------------------------------------------------------
# up


def cmd_up(args: argparse.Namespace, settings: Settings) -> int:
    host = args.host or settings.host
    port = args.port or settings.port
    exposed = host not in ("127.0.0.1", "localhost", "::1")
    if exposed and not settings.password:
        raise CliError(
            f"Refusing to listen on {host} without authentication: set PITWALL_PASSWORD "
            "(or password in pitwall.toml), or bind to 127.0.0.1.",
            EXIT_USAGE,
        )
    open_db(settings)  # create / check the database before starting anything
    _private_dirs(settings)
    env = dict(os.environ)
    env["PITWALL_HOST"] = host
    env["PITWALL_PORT"] = str(port)
    env["PITWALL_DATA_DIR"] = str(settings.data_dir)
    env["PITWALL_DATABASE_URL"] = settings.database_url
    env["PITWALL_MANAGED_RUNNER"] = "1"  # app.py: `pitwall up` owns the runner
    if settings.config_path:
        env["PITWALL_CONFIG"] = str(settings.config_path)
    from runner.up import up

    app_argv = [
        sys.executable, "-m", "streamlit", "run", str(REPO_ROOT / "app.py"),
        "--server.address", host, "--server.port", str(port), "--server.headless", "true",
        "--browser.gatherUsageStats", "false",
    ]
    shown = "localhost" if host == "127.0.0.1" else host
    banner = f"Pitwall {__version__} is starting: http://{shown}:{port}  (Ctrl-C stops everything)"
    if settings.demo_active:
        from collectors.engines import DEFAULT_ENGINE, display_name

        banner += (f"\nNo servers configured: running the demo (bundled {display_name(DEFAULT_ENGINE)} "
                   "simulator, profile 'demo').")
    code = up(app_argv, env, cwd=REPO_ROOT, runner_stop_s=RUNNER_STOP_TIMEOUT_S, on_started=banner)
    print("Pitwall stopped.", flush=True)
    return EXIT_OK if code == 0 else EXIT_FAIL


# --------------------------------------------------------------------------------------------
# collect


def cmd_collect(args: argparse.Namespace, settings: Settings) -> int:
    from cli.wiring import build_runner
    from dashboard.services.views.servers import ServerOwnershipError, seed_demo, sync_servers
    from runner.lease import LeaseHeld
    from runner.self_metrics import limit_malloc_arenas

    limit_malloc_arenas()  # before the poll threads start (runner/self_metrics.py says why)
    logging.basicConfig(
        level=logging.INFO, format="[%(asctime)s] pitwall-runner %(levelname)s %(message)s"
    )
    for noisy in ("httpx", "httpcore"):  # one line per scrape would drown the runner's own log
        logging.getLogger(noisy).setLevel(logging.WARNING)
    engine = open_db(settings)
    _private_dirs(settings)
    try:
        sync_servers(engine, settings)
    except ServerOwnershipError as exc:
        raise CliError(str(exc)) from None
    runner = build_runner(settings, engine)

    def _on_signal(signum: int, _frame: object) -> None:
        runner.stop()

    # before the lease: a SIGTERM that lands between acquiring it and running must still end in
    # run()'s shutdown, which releases the lease (the default action would leave it held)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        runner.acquire()  # before seeding: two runners started at once must not both seed
    except LeaseHeld as exc:
        raise CliError(str(exc)) from None
    seed_demo(engine, settings)
    try:
        runner.run(duration_s=args.duration)
    except LeaseHeld as exc:
        raise CliError(str(exc)) from None
    _exit_past_abandoned_polls()
    return EXIT_OK


def _exit_past_abandoned_polls() -> None:
    """End the process now when a poll thread is still running after the runner's shutdown.

    runner.run has returned: servers stopped, the last batch flushed, the lease released. A poll
    abandoned after POLL_JOIN_S (a server stalling a read until its total deadline) is a
    ThreadPoolExecutor worker, which the interpreter joins again at exit, so `collect --duration S`
    could outlive S by a whole poll (several reads in a row). Nothing is left to write, so exit
    without that join; with no such thread, return and exit normally.
    """
    import threading

    if any(t.is_alive() and not t.daemon for t in threading.enumerate()
           if t is not threading.current_thread()):
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_OK)


# --------------------------------------------------------------------------------------------
# status


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from dashboard.services.views import health

    engine = open_db(settings, create=False)
    ttl_s = float(settings.runner.get("lease_ttl_s", 15.0))
    report = health.runner_health(engine, settings.database_url, host=settings.runner.get("host"))
    print(f"config     {settings.config_path or 'none (defaults and PITWALL_* variables only)'}")
    print(f"database   {health.shown_url(settings.database_url)}  "
          f"({health.fmt_bytes(report.db_bytes, missing='size n/a')})")
    print(f"runner     {report.summary}")
    for info in health.list_runners(engine, ttl_s=ttl_s):  # a fleet: every runner host
        print(f"host       {info.line}")
    for server in report.servers:
        print(f"server     {server}")
    return EXIT_OK


# --------------------------------------------------------------------------------------------


def _shown(exc: Exception) -> str:
    """An error as one line for the terminal, secrets masked (a bad database URL, say)."""
    from storage.redact import redact_text

    return redact_text(str(exc))


def _delegate(module: str, func: str) -> Callable[[list[str]], int]:
    def run(argv: list[str]) -> int:
        import importlib

        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            raise CliError(f"This Pitwall build lacks {module} ({exc}).") from None
        result: int = getattr(mod, func)(argv)
        return result

    return run


def _engine_option(argv: list[str]) -> tuple[str | None, list[str]]:
    """(the NAME of `--engine NAME` / `--engine=NAME`, or None; argv without it)."""
    for i, arg in enumerate(argv):
        if arg.startswith("--engine="):
            return arg.split("=", 1)[1], argv[:i] + argv[i + 1:]
        if arg == "--engine":
            if i + 1 >= len(argv):
                raise CliError("--engine needs a name (the server's engine, e.g. the default one); "
                               "pass --engine NAME.", EXIT_USAGE)
            return argv[i + 1], argv[:i] + argv[i + 2:]
    return None, argv


def _engine_command(command: str) -> Callable[[list[str]], int]:
    """`pitwall <command> [--engine NAME] ARGS`: the engine's own entry for `command` takes ARGS."""
    def run(argv: list[str]) -> int:
        from collectors.base import CollectorError
        from collectors.engines import DEFAULT_ENGINE, display_name, get_engine

        name, rest = _engine_option(argv)
        try:
            engine = get_engine(name or DEFAULT_ENGINE)
        except CollectorError as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
        entry = engine.commands.get(command)
        if entry is None:
            raise CliError(f"The {display_name(engine.name)} engine has no `pitwall {command}`; "
                           "pass --engine with an engine that has one.", EXIT_USAGE)
        return entry(rest)

    return run


# Subcommands implemented by their own modules take the rest of the command line.
DELEGATED: dict[str, tuple[str, Callable[[list[str]], int]]] = {
    "parse-log": ("parse an engine's saved log into JSON lines (--engine NAME)", _engine_command("parse-log")),
    "parse-metrics": ("parse a saved /metrics payload into JSON (--engine NAME)", _engine_command("parse-metrics")),
    "probe": ("run a probe / load sweep against a server", _delegate("collectors.probe.cli", "probe_cli")),
    "profiles": ("list, validate and diff launch profiles", _delegate("cli.profiles", "profiles_cli")),
    "launch": ("start a managed server under a profile", _delegate("cli.profiles", "launch_cli")),
    "stop": ("stop a managed server", _delegate("cli.profiles", "stop_cli")),
    "relaunch": ("relaunch a managed server under a profile (rolls back on failure)", _delegate("cli.profiles", "relaunch_cli")),
    "tune": ("relaunch a server under candidate profiles, run one workload, rank them", _delegate("cli.tune", "tune_cli")),
    "export": ("export a scorecard as md, html, csv, json or png", _delegate("cli.export", "export_cli")),
    "alerts": ("alerts: list firing ones, silence a rule or server, send a test", _delegate("cli.alerts", "alerts_cli")),
    "trace": ("import request traces (Mooncake, Azure, BurstGPT, the engine's own logs), list, show, delete",
              _delegate("cli.trace", "trace_cli")),
    "gpu-wall": ("which wall each GPU hit: memory bandwidth, compute or neither (GPM)", _delegate("cli.gpu_wall", "gpu_wall_cli")),
}


def build_parser() -> argparse.ArgumentParser:
    from collectors.engines import DEFAULT_ENGINE, display_name

    p = argparse.ArgumentParser(
        prog="pitwall",
        description=f"Pitwall: the operator's cockpit for {display_name(DEFAULT_ENGINE)} servers.",
    )
    p.add_argument("--version", action="version", version=f"pitwall {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    up = sub.add_parser("up", help="start the runner and the dashboard (Ctrl-C stops both)")
    up.add_argument("--host", help="address to bind (default 127.0.0.1, or PITWALL_HOST)")
    up.add_argument("--port", type=int, help="port (default 8501, or PITWALL_PORT)")
    col = sub.add_parser("collect", help="run the runner in the foreground")
    col.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    sub.add_parser("status", help="runner, database and servers at a glance")
    for name, (help_text, _) in DELEGATED.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return p


COMMANDS = {"up": cmd_up, "collect": cmd_collect, "status": cmd_status}


def _slo_targets(settings: Settings) -> str:
    """The global [slo] targets (pitwall.toml and the UI's edits) as {key: target} JSON."""
    import json

    from scorecard.slo import load_overrides, resolve

    overrides = None
    try:
        overrides = load_overrides(open_db(settings, create=False))
    except PitwallError:
        pass  # no database yet: the file's targets and the defaults
    return json.dumps({k: t.target for k, t in resolve(None, settings.slo, overrides).targets.items()})


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in DELEGATED:
            rest = argv[1:]
            if argv[0] == "probe" and not {"-h", "--help"} & set(rest):
                settings = load_settings()
                if settings.read_only:  # a sweep is a control on the dashboard too
                    raise CliError("Pitwall is read-only (read_only / PITWALL_READ_ONLY), so `pitwall probe` "
                                   "sends no load; unset it to run a probe.", EXIT_USAGE)
                if "--db" not in rest:
                    # collectors/ cannot read pitwall.toml: hand it the configured database
                    rest += ["--db", settings.database_url]
                if "--trace" in rest and "--slo" not in rest:
                    rest += ["--slo", _slo_targets(settings)]  # what `--speed auto` holds a replay to
            return DELEGATED[argv[0]][1](rest)
        parser = build_parser()
        args = parser.parse_args(argv)
        if not args.command:
            parser.print_help()
            return EXIT_USAGE
        settings = load_settings()
        return COMMANDS[args.command](args, settings)
    except PitwallError as exc:  # a bad setting exits 2 (EXIT_USAGE), a CliError its own code
        print(f"pitwall: {_shown(exc)}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
