"""A real Prometheus (the Debian `prometheus` binary) scraping real simulators on loopback, for the
Prometheus-as-a-source tests (collector and view reads).

`PromRig` starts simulators (`python -m simulator.launch_server --enable-metrics`) on fixed free
ports and one Prometheus with scrape_interval 1 s whose static targets are those ports; a
simulator can be stopped and started again on the same port (a gap Prometheus sees as up=0).
Import as `from prom_rig import PromRig, needs_prometheus`.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pwtest import PY, REPO, free_port, stop_process, subprocess_env, wait_for

PROMETHEUS = shutil.which("prometheus")
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None,
    reason="the prometheus binary is not installed (Debian package `prometheus`; "
    "scripts/system_deps.sh installs it)",
)
SCRAPE_S = 1.0
READY_LINE = "The server is fired up and ready to roll!"


class PromRig:
    """Simulators and one Prometheus in `folder`; `close()` stops every process it started."""

    def __init__(self, folder: Path, n_sims: int = 1) -> None:
        self.folder = folder
        self.sim_ports = [free_port() for _ in range(n_sims)]
        self.sims: dict[int, subprocess.Popen[bytes]] = {}
        self.prom: subprocess.Popen[bytes] | None = None
        self.prom_port = free_port()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.prom_port}"

    def base(self, i: int = 0) -> str:
        return f"http://127.0.0.1:{self.sim_ports[i]}"

    def instance(self, i: int = 0) -> str:
        return f"127.0.0.1:{self.sim_ports[i]}"

    def start_sim(self, i: int = 0) -> None:
        port = self.sim_ports[i]
        log = self.folder / f"sim-{port}.log"
        with open(log, "ab") as fh:
            self.sims[i] = subprocess.Popen(
                [PY, "-m", "simulator.launch_server", "--model-path", "Qwen/Qwen2.5-7B-Instruct",
                 "--host", "127.0.0.1", "--port", str(port), "--enable-metrics",
                 "--sim-speed", "50", "--sim-startup-s", "1"],
                stdout=fh, stderr=subprocess.STDOUT, cwd=REPO, env=subprocess_env())
        wait_for(lambda: READY_LINE in log.read_text(errors="replace")
                 or self.sims[i].poll() is not None, 60, "the simulator to be ready")
        assert self.sims[i].poll() is None, log.read_text(errors="replace")[-2000:]

    def stop_sim(self, i: int = 0) -> None:
        stop_process(self.sims.pop(i))

    def start_prometheus(self) -> None:
        assert PROMETHEUS is not None
        targets = ", ".join(f'"{self.instance(i)}"' for i in range(len(self.sim_ports)))
        config = self.folder / "prometheus.yml"
        config.write_text(
            f"global:\n  scrape_interval: {SCRAPE_S:g}s\n  scrape_timeout: {SCRAPE_S:g}s\n"
            f"scrape_configs:\n  - job_name: sglang\n    static_configs:\n"
            f"      - targets: [{targets}]\n"
        )
        with open(self.folder / "prometheus.log", "ab") as fh:
            self.prom = subprocess.Popen(
                [PROMETHEUS, f"--config.file={config}",
                 f"--storage.tsdb.path={self.folder / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{self.prom_port}"],
                stdout=fh, stderr=subprocess.STDOUT, cwd=self.folder)
        wait_for(self._ready, 60, "Prometheus /-/ready")

    def _ready(self) -> bool:
        assert self.prom is not None
        if self.prom.poll() is not None:
            log = (self.folder / "prometheus.log").read_text(errors="replace")
            raise AssertionError(f"prometheus exited {self.prom.returncode}:\n{log[-2000:]}")
        try:
            return httpx.get(self.url + "/-/ready", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def stop_prometheus(self) -> None:
        if self.prom is not None:
            stop_process(self.prom, 20)
        self.prom = None

    def kill_prometheus(self) -> None:
        """SIGKILL: no staleness markers written, so query_range carries values over the gap."""
        if self.prom is not None:
            self.prom.kill()
            self.prom.wait(timeout=20)
        self.prom = None

    def query(self, q: str) -> list[dict[str, object]]:
        resp = httpx.get(self.url + "/api/v1/query", params={"query": q}, timeout=10)
        return list(resp.json()["data"]["result"])

    def wait_scraped(self, i: int = 0, n: int = 2) -> None:
        """Until Prometheus holds `n` scrapes of simulator i with sglang series."""
        q = f'count_over_time(sglang:num_running_reqs{{instance="{self.instance(i)}"}}[1m])'
        wait_for(lambda: any(float(r["value"][1]) >= n for r in self.query(q)),  # type: ignore[index]
                 90, f"{n} scrapes of the simulator in Prometheus", poll_s=0.2)

    def wait_scraped_after(self, t: float, i: int = 0) -> None:
        """Until Prometheus has a successful scrape of simulator i stamped after t (s)."""
        q = f'timestamp(up{{instance="{self.instance(i)}"}} == 1)'
        wait_for(lambda: any(float(r["value"][1]) > t for r in self.query(q)),  # type: ignore[index]
                 90, "a fresh scrape of the simulator", poll_s=0.2)

    def load(self, i: int = 0, n: int = 4) -> None:
        """n short /generate requests (counters, histograms and rates get something to show)."""
        with httpx.Client(base_url=self.base(i), timeout=60) as c:
            for k in range(n):
                r = c.post("/generate", json={"text": f"hello {k}",
                                              "sampling_params": {"max_new_tokens": 8}})
                assert r.status_code == 200, r.text

    def close(self) -> None:
        for i in list(self.sims):
            self.stop_sim(i)
        self.stop_prometheus()


@pytest.fixture(name="rig")
def rig_fixture(tmp_path: Path) -> Iterator[PromRig]:
    """One simulator scraped every second by a fresh Prometheus, 2 scrapes in; all stopped after.
    Use with `from prom_rig import rig_fixture` in a test module (skip it with `needs_prometheus`)."""
    r = PromRig(tmp_path)
    try:
        r.start_sim()
        r.start_prometheus()
        r.wait_scraped(n=2)
        yield r
    finally:
        r.close()
