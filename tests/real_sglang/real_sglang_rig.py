"""Pitwall driving the real SGLang 0.5.23 CPU server: profiles written from the built environment,
a real Runner (real collectors + the launcher's supervisor) in a thread, and readers that parse
the real log file independently of Pitwall's log collector (to check it against).

Imported by tests/real_sglang/test_real_sglang_pitwall.py as `real_sglang_rig` (no package).

Why profiles are written into tmp_path, not shipped in profiles/: a real-CPU profile needs the
model folder and the sgl_kernel shim of the environment build_env.sh made on THIS machine
(`pitwall-sglang-cpu.env`), and a repo file must never hold an absolute path of a machine.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from real_sglang_helpers import rs
from sqlalchemy.engine import Engine

from cli.wiring import runner_parts
from collectors.registry import build_collectors
from config.settings import Settings
from launching import launcher
from launching.profiles import ProfileSpec, dump_profile
from runner.loop import Runner
from storage import repo
from storage.db import make_engine
from storage.models import Server

SERVER_NAME = "real-cpu"
# Collector intervals for the tier (the registry's defaults are 1 s log, 5 s metrics/api): shorter
# so a test waits seconds, not tens of seconds, for the next poll. Same classes, same code.
INTERVALS = {"sglang_log": 0.5, "sglang_metrics": 1.0, "sglang_api": 2.0}


def _typed(value: str) -> Any:
    try:
        return int(value)
    except ValueError:
        return value


def base_profile_flags() -> dict[str, Any]:
    """real_server.BASE_FLAGS (the CPU launch line) as profile [flags].

    `--flag value` -> {"flag": value}; a bare `--switch` -> {"switch": True}. Decode lines every
    5 steps (not 10) so a short request logs some.
    """
    flags: dict[str, Any] = {}
    argv = list(rs.BASE_FLAGS)
    i = 0
    while i < len(argv):
        name = argv[i].removeprefix("--")
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            flags[name] = _typed(argv[i + 1])
            i += 2
        else:
            flags[name] = True
            i += 1
    flags["decode-log-interval"] = 5
    return flags


def profile_env(env: dict[str, str]) -> dict[str, str]:
    """The server environment of real_server.server_environ(), as profile [env]."""
    # the sgl_kernel shim is on the test venv's path (.pth, build_env.sh); Pitwall sets
    # PYTHONUNBUFFERED itself, and a profile may set no PYTHON* variable (launch sandbox)
    return {"SGLANG_USE_CPU_ENGINE": "1"}


def write_profile(folder: Path, env: dict[str, str], name: str, extra: dict[str, Any] | None = None) -> ProfileSpec:
    spec = ProfileSpec(
        name=name,
        description="real SGLang 0.5.23 on CPU, tiny dummy-weight Llama (test tier)",
        model_path=env["MODEL"],
        entrypoint="sglang.launch_server",
        flags={**base_profile_flags(), **(extra or {})},
        env=profile_env(env),
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.toml").write_text(dump_profile(spec), encoding="utf-8")
    return spec


def wait_for(cond: Callable[[], Any], timeout: float, what: str, every: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@dataclass
class Rig:
    engine: Engine
    settings: Settings
    server: Server
    runner: Runner
    env: dict[str, str]
    log_path: Path
    port: int

    @property
    def sid(self) -> int:
        assert self.server.id is not None
        return self.server.id

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(self, kind: str, profile: str | None = None, timeout_s: float = 420.0) -> Any:
        """Request a lifecycle intent through the launcher and follow it to its end."""
        intent = launcher.request(self.engine, kind=kind, server_name=SERVER_NAME, actor="test", profile=profile)
        assert intent.id is not None
        final = launcher.follow(self.engine, intent.id, timeout_s=timeout_s, poll_s=0.25)
        assert final is not None and final.state in launcher.FINAL_STATES, f"{kind} did not finish: {final}"
        return final


@contextmanager
def running_rig(env: dict[str, str], root: Path, profiles: dict[str, dict[str, Any]], default: str) -> Iterator[Rig]:
    """A managed server row, profiles in root/profiles, and a real Runner thread (no auto-start)."""
    folder = root / "profiles"
    for name, extra in profiles.items():
        write_profile(folder, env, name, extra)
    (root / "data").mkdir(parents=True, exist_ok=True)
    db_url = f"sqlite:///{root / 'data' / 'pitwall.db'}"
    engine = make_engine(db_url)
    settings = Settings(data_dir=root / "data", database_url=db_url, profiles_dir=folder)
    port = rs.free_port()
    log_path = root / "data" / "logs" / f"{SERVER_NAME}.log"
    server = repo.upsert_server(engine, name=SERVER_NAME, base_url=f"http://127.0.0.1:{port}", managed=True,
                                python=env["PYTHON"], profile=default, log_path=str(log_path))
    supervisor, handlers = runner_parts(settings, engine, auto_start=False)
    collectors, errors = build_collectors({"canary_interval_s": 0})
    assert not errors, errors
    for c in collectors:
        if c.name in INTERVALS:
            c.interval_s = INTERVALS[c.name]
    runner = Runner(engine, collectors, supervisor=supervisor, intent_handlers=handlers, tick_s=0.1)
    thread = threading.Thread(target=runner.run, name="pitwall-runner", daemon=True)
    thread.start()
    rig = Rig(engine, settings, server, runner, env, log_path, port)
    try:
        yield rig
    finally:
        runner.stop()  # the supervisor's shutdown SIGTERMs the server it runs
        thread.join(180)
        latest = repo.latest_launch(engine, server_id=rig.sid)
        if latest is not None and latest.pid and latest.ended_at is None:
            import os
            import signal

            try:  # belt and braces: never leave a real server behind
                os.killpg(latest.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        engine.dispose()
        assert not thread.is_alive(), "the runner thread did not stop"


# ---------------------------------------------------------------------------------------------
# the real log, read independently of collectors/sglang/log*.py

_LINE = re.compile(r"^\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:\.\d+)?(?: [A-Z_]+\d+)*\] (?P<body>.*)$")
_INT = r"(\d+)"


@dataclass(frozen=True)
class Batch:
    ts: float  # local time of the line's prefix, epoch seconds (second resolution)
    kind: str  # "prefill" | "decode"
    fields: dict[str, float]


def log_batches(text: str) -> list[Batch]:
    """Prefill/Decode batch lines of a real 0.5.23 log with their numbers (by field name)."""
    out: list[Batch] = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        body = m.group("body")
        if body.startswith("Prefill batch, "):
            kind = "prefill"
        elif body.startswith("Decode batch, "):
            kind = "decode"
        else:
            continue
        fields: dict[str, float] = {}
        for part in body.split(", ")[1:]:
            key, sep, value = part.partition(": ")
            if sep:
                try:
                    fields[key] = float(value)
                except ValueError:
                    pass  # `cpu graph: False`
        ts = datetime.strptime(m.group("ts"), "%Y-%m-%d %H:%M:%S").timestamp()
        out.append(Batch(ts, kind, fields))
    return out


def field_sum(batches: list[Batch], kind: str, key: str, since: float, until: float) -> tuple[float, int]:
    vals = [b.fields[key] for b in batches if b.kind == kind and since <= b.ts < until and key in b.fields]
    return float(sum(vals)), len(vals)
