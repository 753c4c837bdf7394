"""Start and stop the real SGLang 0.5.23 CPU test server (TEST ENVIRONMENT ONLY, stdlib only).

Owns: finding the environment built by build_env.sh (its `pitwall-sglang-cpu.env` file), the
argv/env of the CPU launch line, a free loopback port, waiting for the ready line, and a
clean SIGTERM shutdown. Used by tests/real_sglang/conftest.py and capture_fixtures.py; Pitwall's
own launcher replaces it in the tests later, so the start lives in one place.

The server always binds 127.0.0.1. Its stdout and stderr go to one log file, the same file
Pitwall's log collector would tail.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ENV_FILE_NAME = "pitwall-sglang-cpu.env"
READY_LINE = "The server is fired up and ready to roll!"
STUB_MARKER = "sgl_kernel stub:"

# The CPU launch flags that work plus what the tests need: Decode lines often
# (--decode-log-interval) and cached tokens in OpenAI usage (--enable-cache-report).
BASE_FLAGS: tuple[str, ...] = (
    "--load-format", "dummy",
    "--device", "cpu",
    "--attention-backend", "torch_native",
    "--disable-overlap-schedule",
    "--enable-metrics",
    "--max-total-tokens", "4096",
    "--log-level", "info",
    "--enable-cache-report",
    "--decode-log-interval", "10",
    # an idle CPU scheduler otherwise polls its sockets nonstop: a whole core per server (measured:
    # 20.2 CPU-s over 20 idle s without it, 0.3 with it), which a 2-core test host cannot spare
    "--sleep-on-idle",
)


def default_env_dir() -> Path:
    """Where build_env.sh puts the environment (same default as the script)."""
    explicit = os.environ.get("PITWALL_SGLANG_CPU_DIR")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "pitwall" / "sglang-cpu"


def parse_env_file(text: str) -> dict[str, str]:
    """KEY=VALUE lines; '#' comments and blank lines ignored; no quoting or expansion."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        out[key.strip()] = value.strip()
    return out


def load_env(env_dir: Path | None = None) -> dict[str, str] | None:
    """The built environment's paths (PYTHON, SHIM, MODEL, ...), or None when not built."""
    path = (env_dir or default_env_dir()) / ENV_FILE_NAME
    if not path.is_file():
        return None
    env = parse_env_file(path.read_text())
    missing = [k for k in ("PYTHON", "SHIM", "MODEL") if k not in env]
    if missing:
        raise ValueError(f"{path} lacks {', '.join(missing)}; rebuild with scripts/sglang_cpu/build_env.sh --force.")
    return env


def free_port() -> int:
    """A port free on 127.0.0.1 right now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_argv(env: dict[str, str], port: int, extra: list[str] | None = None) -> list[str]:
    return [
        env["PYTHON"], "-m", "sglang.launch_server",
        "--model-path", env["MODEL"],
        "--host", "127.0.0.1", "--port", str(port),
        *BASE_FLAGS,
        *(extra or []),
    ]


def server_environ(env: dict[str, str]) -> dict[str, str]:
    """Process environment: SGLang's CPU engine, the sgl_kernel shim, nothing inherited on PYTHONPATH."""
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    environ["SGLANG_USE_CPU_ENGINE"] = "1"
    environ["PYTHONPATH"] = env["SHIM"]  # TEST-ENVIRONMENT SHIM: import-only sgl_kernel stub
    environ["PYTHONUNBUFFERED"] = "1"
    return environ


@dataclass
class RealServer:
    """One running real SGLang server; `start()` returns once the ready line is logged."""

    env: dict[str, str]
    log_path: Path
    extra_flags: list[str] = field(default_factory=list)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    ready_s: float | None = None  # launch -> ready line, seconds

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        return server_argv(self.env, self.port, self.extra_flags)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self, timeout_s: float = 420.0) -> RealServer:
        self.port = self.port or free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("wb")
        self.started_at = time.monotonic()
        # Own session, so stop() can end the launcher and its scheduler/detokenizer children by pgid.
        self.proc = subprocess.Popen(
            self.argv(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=server_environ(self.env), start_new_session=True,
        )
        log.close()
        deadline = self.started_at + timeout_s
        while time.monotonic() < deadline:
            if READY_LINE in self.log_text():
                self.ready_s = time.monotonic() - self.started_at
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"real SGLang server exited with code {self.proc.returncode} before the ready "
                    f"line; see {self.log_path}:\n{self.log_text()[-3000:]}"
                )
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"real SGLang server not ready within {timeout_s:.0f} s; see {self.log_path}")

    def stop(self, timeout_s: float = 60.0) -> int | None:
        """SIGTERM the launcher (clean shutdown), then SIGKILL its group if it lingers."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                pass
        try:  # children (scheduler, detokenizer) share the launcher's process group
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.proc.poll() is None:
            self.proc.wait(timeout=10)
        return self.proc.returncode


def http_get(url: str, timeout_s: float = 30.0) -> tuple[int, bytes]:
    """(status, body); HTTP errors come back as their status, not as exceptions."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read()
