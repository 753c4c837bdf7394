"""Real receivers on loopback for the alert tests: a webhook that records what it was sent (and
can be taken down and brought back on the same port), and a real Prometheus Alertmanager."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

AM_BINARY = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Webhook:
    """POST bodies land in `.bodies` (parsed JSON), headers in `.headers`."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.bodies: list[Any] = []
        self.headers: list[dict[str, str]] = []
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook/T000/SECRETPATH"

    def start(self) -> Webhook:
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                hook.bodies.append(json.loads(body))
                hook.headers.append(dict(self.headers))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def alerts(self) -> list[dict[str, Any]]:
        """Every alert of every body, in arrival order (Pitwall's and Alertmanager's shapes alike)."""
        return [a for b in self.bodies for a in b.get("alerts", [])]


class Alertmanager:
    """prometheus-alertmanager on loopback, routing everything to `hook` at once."""

    def __init__(self, tmp: Path, hook: Webhook) -> None:
        self.port = free_port()
        self.tmp = tmp
        config = tmp / "alertmanager.yml"
        config.write_text(
            "route:\n  receiver: hook\n  group_by: ['alertname', 'server']\n  group_wait: 1s\n"
            "  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: hook\n"
            f"    webhook_configs:\n      - url: 'http://127.0.0.1:{hook.port}/am'\n        send_resolved: true\n",
            encoding="utf-8")
        self.proc = subprocess.Popen(
            [str(AM_BINARY), f"--config.file={config}", f"--storage.path={tmp / 'am-data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address=",
             "--log.level=warn"], stdout=subprocess.DEVNULL, stderr=open(tmp / "am.log", "wb"))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"Alertmanager did not start: {(tmp / 'am.log').read_text()}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def active(self) -> list[dict[str, Any]]:
        return list(httpx.get(f"{self.url}/api/v2/alerts", params={"active": "true"}, timeout=5).json())

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def wait_for(predicate: Any, *, timeout_s: float = 30.0, what: str = "condition") -> None:
    """Poll `predicate` until true (a bound on a hang, not a timing assertion)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
