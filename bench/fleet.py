"""Benchmark: a fleet of 50 simulated servers, two runners, one PostgreSQL, one Prometheus.

Run: ``.venv/bin/python bench/fleet.py [--servers 50] [--seconds 120] [--scrape-s 5] [--paint-runs 3]
[--days 7] [--keep DIR]``

What it sets up, all on loopback of this one host:
- a throwaway PostgreSQL cluster (Debian's `postgresql` server binaries, run as the `postgres`
  user when root), the store of both runners and of the dashboard;
- `--servers` managed simulator servers (`python -m simulator.launch_server`, started by the
  runners from three launch profiles of three model sizes): the first half belong to runner
  host `bench-a`, which scrapes their /metrics itself; the second half to runner host `bench-b`,
  which reads their `sglang:*` series through a real Prometheus (Debian's `prometheus`) that
  scrapes them every `--scrape-s` seconds;
- two `pitwall collect` processes (PITWALL_RUNNER_HOST=bench-a / bench-b), each with its own
  pitwall.toml, one PostgreSQL URL;
- a light load on every server (one short /generate request every ~2 s each, from this process,
  aiohttp), so logs, metrics and canaries carry real traffic.

What it measures, once every server is ready and a warm-up has passed:
- runner CPU: each runner process's CPU time over `--seconds`, as % of one core, and per server
  (÷ the servers it owns); side by side, the direct-scrape runner (bench-a) and the
  Prometheus-reading runner (bench-b);
- rows/s into PostgreSQL: Sample rows written in the window (count(*) at both ends), in all and
  per runner (by the servers each owns);
- Overview first paint at `--servers` servers: `streamlit run app.py` on the same store, headless
  Chromium (Debian's /usr/bin/chromium) with a fresh profile: navigation to the fleet table showing
  every server, `--paint-runs` times, 6 s apart so the page's 4-s cache has expired;
- the Prometheus 7-day view: a second Prometheus whose TSDB holds `--days` days of one server's
  view series at the scrape interval, backfilled with `promtool tsdb create-blocks-from
  openmetrics`, read through the view service (dashboard/services/views/prom_series.py) with the
  step matched to the window; milliseconds per read (median of 5, after one warm-up read).

Everything shares the machine's cores (2 on CI-class machines): simulators, PostgreSQL,
Prometheus, the load and the runners. The figures are what one host of this size sustains, not
what a runner costs on an idle host. Nothing here is a test: it prints a table and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROFILES = (  # (profile name, model path) - three model sizes across the fleet
    ("fleet-llama-8b", "meta-llama/Llama-3.1-8B-Instruct"),
    ("fleet-qwen-14b", "Qwen/Qwen2.5-14B-Instruct"),
    ("fleet-mistral-7b", "mistralai/Mistral-7B-Instruct-v0.3"),
)
HOSTS = ("bench-a", "bench-b")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports(n: int) -> list[int]:
    """n distinct free loopback ports (held open together so none repeats)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def http_json(url: str, timeout: float = 10.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - loopback only
        return json.loads(resp.read(50_000_000))


def wait_until(cond: Callable[[], Any], timeout: float, what: str, poll_s: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = cond()
        except Exception:
            value = None
        if value:
            return value
        time.sleep(poll_s)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


# ---------------------------------------------------------------------------------------------
# PostgreSQL and Prometheus


class Postgres:
    """A throwaway cluster on a Unix socket in `root` (as the `postgres` user when root)."""

    def __init__(self, root: Path) -> None:
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
        if not bins:
            raise SystemExit("PostgreSQL server binaries are missing: apt-get install postgresql")
        self.bin = bins[-1]
        self.root = root
        self.data, self.sock = root / "data", root / "sock"
        root.mkdir(parents=True)
        self.sock.mkdir()
        if os.geteuid() == 0:
            shutil.chown(root, "postgres")
            shutil.chown(self.sock, "postgres")
        self._run(f"{self.bin}/initdb", "-D", str(self.data), "-A", "trust", "-U", "pitwall")
        self._run(f"{self.bin}/pg_ctl", "-D", str(self.data), "-w", "-l", str(root / "log"), "-o",
                  f"-k {self.sock} -c listen_addresses='' -c max_connections=300", "start")
        self.url = f"postgresql+psycopg://pitwall@/postgres?host={self.sock}"

    def _run(self, *argv: str) -> None:
        cmd = list(argv) if os.geteuid() != 0 else ["runuser", "-u", "postgres", "--", *argv]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if res.returncode != 0:
            raise SystemExit(f"{argv[0]} failed: {res.stderr.strip()[:400]}")

    def stop(self) -> None:
        try:
            self._run(f"{self.bin}/pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")
        except SystemExit:
            pass


def start_prometheus(root: Path, targets: list[str], scrape_s: float,
                     tsdb: Path | None = None) -> tuple[subprocess.Popen[bytes], str]:
    exe = shutil.which("prometheus")
    if exe is None:
        raise SystemExit("prometheus is missing: apt-get install prometheus")
    root.mkdir(parents=True, exist_ok=True)
    cfg = root / "prometheus.yml"
    cfg.write_text(json.dumps({
        "global": {"scrape_interval": f"{scrape_s:g}s", "scrape_timeout": f"{min(scrape_s, 10):g}s"},
        "scrape_configs": [{"job_name": "sglang", "static_configs": [{"targets": targets}]}] if targets else [],
    }))  # YAML is a superset of JSON
    port = free_port()
    proc = subprocess.Popen(
        [exe, f"--config.file={cfg}", f"--storage.tsdb.path={tsdb or root / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=30d"],
        stdout=subprocess.DEVNULL, stderr=open(root / "prometheus.log", "wb"), start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: urllib.request.urlopen(url + "/-/ready", timeout=2).status == 200, 60, "Prometheus ready")
    return proc, url


# ---------------------------------------------------------------------------------------------
# the fleet


def write_profiles(folder: Path) -> None:
    folder.mkdir(parents=True)
    for name, model in PROFILES:
        (folder / f"{name}.toml").write_text(
            f'name = "{name}"\ndescription = "bench/fleet.py"\nmodel_path = "{model}"\n'
            'entrypoint = "simulator.launch_server"\n'
            '[flags]\nenable-metrics = true\nenable-cache-report = true\n'
            '[env]\nSGLANG_SIM_GPU = "h200"\nSGLANG_SIM_SPEED = "1"\n'
        )


def write_config(path: Path, *, host: str, servers: list[tuple[str, int, str]], prom_url: str | None) -> None:
    lines = ['demo = "off"\n']
    for name, port, profile in servers:
        lines.append(
            f'[[servers]]\nname = "{name}"\nbase_url = "http://127.0.0.1:{port}"\nmanaged = true\n'
            f'profile = "{profile}"\nhost = "{host}"\ngpu_hourly_usd = 3.5\n'
            + (f'prometheus_url = "{prom_url}"\n' if prom_url else "")
        )
    path.write_text("\n".join(lines))


def runner_env(base: Mapping[str, str], *, host: str, data: Path, cfg: Path, db_url: str, profiles: Path) -> dict[str, str]:
    env = dict(base)
    env.update(PITWALL_RUNNER_HOST=host, PITWALL_DATA_DIR=str(data), PITWALL_CONFIG=str(cfg),
               PITWALL_DATABASE_URL=db_url, PITWALL_PROFILES_DIR=str(profiles), PITWALL_DEMO="off",
               PYTHONPATH=str(ROOT))
    return env


async def _load(ports: list[int], stop: asyncio.Event, every_s: float) -> int:
    import aiohttp

    sent = 0

    async def one(session: aiohttp.ClientSession, port: int, offset: float) -> None:
        nonlocal sent
        await asyncio.sleep(offset)
        while not stop.is_set():
            try:
                async with session.post(f"http://127.0.0.1:{port}/generate", json={
                    "text": f"fleet bench request {sent}", "sampling_params": {"max_new_tokens": 32}},
                        timeout=aiohttp.ClientTimeout(total=30)) as resp:
                    await resp.read()
                    sent += 1
            except Exception:
                pass
            try:
                await asyncio.wait_for(stop.wait(), every_s)
            except TimeoutError:
                pass

    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(one(session, p, i * every_s / len(ports)) for i, p in enumerate(ports)))
    return sent


class Load:
    """Background load from a thread running its own event loop."""

    def __init__(self, ports: list[int], every_s: float = 2.0) -> None:
        import threading

        self.loop = asyncio.new_event_loop()
        self.stop_ev: asyncio.Event | None = None
        self.sent = 0

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.stop_ev = asyncio.Event()
            self.sent = self.loop.run_until_complete(_load(ports, self.stop_ev, every_s))

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        if self.stop_ev is not None:
            self.loop.call_soon_threadsafe(self.stop_ev.set)
        self.thread.join(60)


def stop_group(proc: subprocess.Popen[Any], wait_s: float = 90.0) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(wait_s)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def sample_rows(engine: Any, server_ids: list[int] | None = None) -> int:
    from sqlalchemy import text

    with engine.connect() as conn:
        if server_ids is None:
            return int(conn.execute(text("SELECT count(*) FROM sample")).scalar_one())
        return int(conn.execute(text("SELECT count(*) FROM sample WHERE server_id = ANY(:ids)"),
                                {"ids": server_ids}).scalar_one())


def cpu_s(pid: int) -> float:
    import psutil

    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


# ---------------------------------------------------------------------------------------------
# Overview first paint

ROWS_JS = """
(want) => {
  // the fleet table has drawn: the page says how many servers it shows, and the data grid's
  // accessible table counts them (aria-rowcount includes the header row) beside its canvas
  if (!(document.body.innerText || '').includes(want + ' servers \u00b7 figures over')) return false;
  const grid = document.querySelector('[data-testid="stDataFrame"]');
  const table = grid && grid.querySelector("table[role='grid']");
  const canvas = grid && grid.querySelector('canvas');
  return !!(table && canvas && canvas.width && Number(table.getAttribute('aria-rowcount')) === want + 1);
}
"""


def overview_paint(env: dict[str, str], *, servers: int, runs: int, shot: Path | None) -> list[float]:
    from playwright.sync_api import sync_playwright

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.address", "127.0.0.1",
         "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    out: list[float] = []
    try:
        wait_until(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).status == 200,
                   90, "Streamlit health")
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path="/usr/bin/chromium",
                args=["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                      "--disable-component-update", "--disable-sync", "--no-first-run"])
            for i in range(runs + 1):  # the first is a discarded warm-up (Python imports, caches)
                ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
                page = ctx.new_page()
                t0 = time.perf_counter()
                page.goto(f"http://127.0.0.1:{port}/")
                page.wait_for_function(ROWS_JS, arg=servers, timeout=120_000, polling=25)
                dt = time.perf_counter() - t0
                if i:
                    out.append(dt)
                if shot is not None and i == runs:
                    page.wait_for_timeout(1500)
                    page.screenshot(path=str(shot), full_page=True)
                ctx.close()
                time.sleep(6)
            browser.close()
    finally:
        stop_group(proc, 20)
    return out


# ---------------------------------------------------------------------------------------------
# Prometheus: a 7-day view


FIXTURE = ROOT / "tests" / "fixtures" / "sim-0.5.23-metrics.prom"  # one real scrape of the simulator


def _families(metric_keys: list[str]) -> list[tuple[str, dict[str, str], list[float]]]:
    """(family, labels, bucket bounds) of the histogram families feeding `metric_keys`, as the
    simulator exposes them (its label sets and bounds, read from a real scrape)."""
    from prometheus_client.parser import text_string_to_metric_families

    from collectors.sglang.metrics_alias import source_names

    stems = set(source_names(metric_keys))
    out: list[tuple[str, dict[str, str], list[float]]] = []
    for fam in text_string_to_metric_families(FIXTURE.read_text()):
        if fam.type != "histogram" or fam.name.split(":", 1)[-1] not in stems:
            continue
        by_labels: dict[tuple[tuple[str, str], ...], list[float]] = {}
        for smp in fam.samples:
            if smp.name.endswith("_bucket"):
                labels = {k: v for k, v in smp.labels.items() if k != "le"}
                by_labels.setdefault(tuple(sorted(labels.items())), []).append(float(smp.labels["le"]))
        out.extend((fam.name, dict(k), sorted(v)) for k, v in by_labels.items())
    return out


def backfill(root: Path, *, scrape_s: float, days: float, metric_keys: list[str], instance: str) -> tuple[Path, int]:
    """OpenMetrics text of `days` days of one server, one scrape every `scrape_s`: the histogram
    families behind `metric_keys` (the simulator's label sets and bucket bounds; a few requests a
    scrape, TTFTs drawn around 0.3 s with a slow hour every day) and `up`, with one 2-hour outage
    (no samples: a gap) on the middle day; turned into TSDB blocks by promtool. It ends 3 hours
    ago, so the head block's range stays free."""
    import numpy as np

    rng = np.random.default_rng(7)
    end = int(time.time() - 3 * 3600)
    start = end - int(days * 86400)
    stamps = np.arange(start, end, int(scrape_s))
    outage = (stamps >= start + days * 43200) & (stamps < start + days * 43200 + 7200)
    stamps = stamps[~outage]
    target = f'instance="{instance}",job="sglang"'
    src = root / "backfill.om"
    root.mkdir(parents=True, exist_ok=True)
    n = 0
    with src.open("w") as f:
        f.write("# TYPE up gauge\n")
        f.writelines(f"up{{{target}}} 1 {t}\n" for t in stamps)
        n += len(stamps)
        for fam, labels, bounds in _families(metric_keys):
            lab = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "," + target
            f.write(f"# TYPE {fam} histogram\n")
            counts = np.zeros(len(bounds))
            total, ssum = 0, 0.0
            for t in stamps:
                k = int(rng.poisson(3))
                slow = 3.0 if (t // 3600) % 24 == 14 else 1.0
                ttft = rng.lognormal(np.log(0.3 * slow), 0.5, size=k)
                counts += np.array([(ttft <= b).sum() for b in bounds])
                total += k
                ssum += float(ttft.sum())
                for b, c in zip(bounds, counts, strict=True):
                    le = "+Inf" if b == float("inf") else repr(b)
                    f.write(f'{fam}_bucket{{{lab},le="{le}"}} {int(c)} {t}\n')
                f.write(f"{fam}_count{{{lab}}} {total} {t}\n{fam}_sum{{{lab}}} {ssum:.6f} {t}\n")
                n += len(bounds) + 2
        f.write("# EOF\n")
    tsdb = root / "tsdb"
    tsdb.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(src), str(tsdb)],
                         capture_output=True, text=True, timeout=3600)
    if res.returncode != 0:
        raise SystemExit(f"promtool failed: {res.stderr.strip()[:400]}")
    src.unlink()
    return tsdb, n


def prom_week(root: Path, *, scrape_s: float, days: float) -> dict[str, Any]:
    """The Server page's Prometheus read (its metrics.* panel keys) over `days` days of one
    server, timed through prom_series.read_window: median of 5 reads after a warm-up."""
    from dashboard.services.views import prom_series, timeseries

    keys = sorted({k for p in timeseries.PANELS for k, _ in p.series if k.startswith("metrics.")})
    instance = "127.0.0.1:1"
    t0 = time.perf_counter()
    tsdb, n = backfill(root, scrape_s=scrape_s, days=days, metric_keys=keys, instance=instance)
    built = time.perf_counter() - t0
    proc, url = start_prometheus(root, [], scrape_s, tsdb=tsdb)
    try:
        end = time.time() - 3 * 3600
        start = end - days * 86400
        reads, win = [], None
        for i in range(6):
            t = time.perf_counter()
            win = prom_series.read_window(url, f'instance="{instance}"', keys, start, end,
                                          scrape_interval_s=scrape_s)
            if i:
                reads.append((time.perf_counter() - t) * 1000.0)
        assert win is not None
        points = int(win.frame["value"].notna().sum())
        return {"samples_backfilled": n, "backfill_s": built, "read_ms": reads, "keys": keys,
                "points": points, "gap_steps": win.gap_steps, "step_s": win.step_s}
    finally:
        stop_group(proc, 20)


# ---------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=120.0, help="measurement window")
    ap.add_argument("--warmup", type=float, default=45.0, help="seconds after every server is ready")
    ap.add_argument("--scrape-s", type=float, default=5.0, help="Prometheus scrape interval")
    ap.add_argument("--paint-runs", type=int, default=3)
    ap.add_argument("--days", type=float, default=7.0, help="days of the Prometheus view")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: paint, prom7d")
    ap.add_argument("--keep", type=Path, default=None,
                    help="copy the runners' logs and the Overview screenshot into this folder")
    args = ap.parse_args()
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    root = Path(tempfile.mkdtemp(prefix="pitwall-fleet-"))
    if os.geteuid() == 0:
        os.chmod(root, 0o755)
    try:  # whatever fails, the work folder (PostgreSQL data, the backfilled TSDB) goes
        results = measure(args, root, skip)
    finally:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            for host in HOSTS:
                if (root / f"{host}.log").exists():
                    shutil.copy(root / f"{host}.log", args.keep / f"{host}.log")
        shutil.rmtree(root, ignore_errors=True)
    report(results)
    return 0


def stop_managed(engine: Any) -> None:
    """SIGKILL the simulators the runners launched and did not stop (a runner killed after its
    stop deadline leaves them: they run in their own sessions)."""
    import psutil

    from storage import repo

    for launch in repo.list_launches(engine):
        if launch.pid and launch.ended_at is None and psutil.pid_exists(launch.pid):
            try:
                os.killpg(launch.pid, signal.SIGKILL)
            except OSError:
                pass


def measure(args: argparse.Namespace, root: Path, skip: set[str]) -> dict[str, Any]:
    from sqlalchemy import text

    from storage.db import make_engine

    procs: list[subprocess.Popen[Any]] = []
    pg = Postgres(root / "pg")
    engine = make_engine(pg.url)
    results: dict[str, Any] = {"servers": args.servers}
    try:
        profiles = root / "profiles"
        write_profiles(profiles)
        ports = free_ports(args.servers)
        half = args.servers // 2
        fleet = [(f"srv-{i:02d}", ports[i], PROFILES[i % len(PROFILES)][0]) for i in range(args.servers)]
        own = {HOSTS[0]: fleet[:half], HOSTS[1]: fleet[half:]}
        prom_proc, prom_url = start_prometheus(root / "prom", [f"127.0.0.1:{p}" for _, p, _ in own[HOSTS[1]]],
                                               args.scrape_s)
        procs.append(prom_proc)
        runners: dict[str, subprocess.Popen[Any]] = {}
        for host in HOSTS:
            cfg = root / f"{host}.toml"
            write_config(cfg, host=host, servers=own[host], prom_url=prom_url if host == HOSTS[1] else None)
            env = runner_env(os.environ, host=host, data=root / host, cfg=cfg, db_url=pg.url, profiles=profiles)
            log = open(root / f"{host}.log", "wb")
            runners[host] = subprocess.Popen([sys.executable, "-m", "cli", "collect"], cwd=ROOT, env=env,
                                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            procs.append(runners[host])
        t_launch = time.monotonic()

        def ready() -> bool:
            with engine.connect() as conn:
                n = conn.execute(text(
                    "SELECT count(DISTINCT server_id) FROM launch WHERE status = 'ready' AND ended_at IS NULL"
                )).scalar_one()
            return int(n) >= args.servers

        wait_until(ready, 900, f"{args.servers} servers ready")
        results["all_ready_s"] = time.monotonic() - t_launch
        ids = {host: [int(r[0]) for r in engine.connect().execute(
            text("SELECT id FROM server WHERE host = :h AND retired_at IS NULL"), {"h": host})] for host in HOSTS}
        load = Load(ports)
        time.sleep(args.warmup)
        c0 = {h: cpu_s(p.pid) for h, p in runners.items()}
        r0 = {h: sample_rows(engine, ids[h]) for h in HOSTS}
        all0 = sample_rows(engine)
        t0 = time.monotonic()
        time.sleep(args.seconds)
        dt = time.monotonic() - t0
        c1 = {h: cpu_s(p.pid) for h, p in runners.items()}
        r1 = {h: sample_rows(engine, ids[h]) for h in HOSTS}
        all1 = sample_rows(engine)
        results["window_s"] = dt
        results["runners"] = {
            h: {"servers": len(ids[h]), "source": "Prometheus" if h == HOSTS[1] else "/metrics",
                "cpu_pct": 100.0 * (c1[h] - c0[h]) / dt,
                "cpu_pct_per_server": 100.0 * (c1[h] - c0[h]) / dt / max(1, len(ids[h])),
                "rows_per_s": (r1[h] - r0[h]) / dt} for h in HOSTS}
        results["rows_per_s_total"] = (all1 - all0) / dt
        if "paint" not in skip:
            env = runner_env(os.environ, host=HOSTS[0], data=root / HOSTS[0], cfg=root / f"{HOSTS[0]}.toml",
                             db_url=pg.url, profiles=profiles)
            env["PITWALL_MANAGED_RUNNER"] = "1"  # the runners run already; the app starts none
            shot = (args.keep / "fleet-overview.png") if args.keep else None
            if shot is not None:
                shot.parent.mkdir(parents=True, exist_ok=True)
            results["overview_first_paint_s"] = overview_paint(env, servers=args.servers, runs=args.paint_runs,
                                                               shot=shot)
        load.stop()
        results["load_requests"] = load.sent
    finally:
        for p in reversed(procs):
            stop_group(p)
        stop_managed(engine)
        engine.dispose()
        pg.stop()
    if "prom7d" not in skip:
        results["prometheus_7d"] = {"days": args.days, **prom_week(root / "prom7d", scrape_s=15.0, days=args.days)}
    return results


def report(r: dict[str, Any]) -> None:
    print(json.dumps(r, indent=1, default=str))
    print()
    print(f"all servers ready after {r.get('all_ready_s', float('nan')):.0f} s; window {r.get('window_s', 0):.0f} s")
    print("| runner | servers | reads | CPU % of a core | CPU % per server | sample rows/s |")
    print("|---|---|---|---|---|---|")
    for h, v in (r.get("runners") or {}).items():
        print(f"| {h} | {v['servers']} | {v['source']} | {v['cpu_pct']:.1f} | {v['cpu_pct_per_server']:.2f} | "
              f"{v['rows_per_s']:.0f} |")
    print(f"sample rows/s into PostgreSQL, all: {r.get('rows_per_s_total', float('nan')):.0f}")
    paint = r.get("overview_first_paint_s")
    if paint:
        print(f"Overview first paint at {r.get('servers')} servers: median {statistics.median(paint):.2f} s "
              f"(runs {', '.join(f'{x:.2f}' for x in paint)})")
    week = r.get("prometheus_7d")
    if week:
        print(f"Prometheus {week['days']:g}-day view ({', '.join(week['keys'])}; step {week['step_s']:.0f} s, "
              f"{week['points']} points, {week['gap_steps']} gap steps): "
              f"median {statistics.median(week['read_ms']):.0f} ms "
              f"(runs {', '.join(f'{x:.0f}' for x in week['read_ms'])}); "
              f"{week['samples_backfilled']} samples backfilled in {week['backfill_s']:.0f} s")


if __name__ == "__main__":
    raise SystemExit(main())
