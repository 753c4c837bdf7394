"""Benchmark: first paint and rerun of a 7-day Server view over 30 days of 1-second samples.

Run: ``.venv/bin/python bench/dashboard_paint.py [--days 30] [--raw-hours 6] [--runs 3] [--keep DIR]``

What it generates (deterministic, seeded; about 1-3 minutes on 2 cores, cached in the --keep
folder when given). 2 servers x 4 GPUs each = 8 GPUs; per server 11 server series
(log.running_req, log.queue_req, log.token_usage, log.gen_throughput_tok_s,
log.input_throughput_tok_s, log.cache_hit_rate, metrics.ttft_p50/p95/p99_s, canary.ttft_s,
canary.e2e_s) plus 5 series per GPU (util_ratio, mem_used_bytes, mem_total_bytes, power_w,
temp_c) = 31 series per server, 62 in all. At 1 s that is 2.59M samples per series over 30 days
(160M rows): the runner keeps only per-minute Rollup rows for history, so the fixture writes

- Rollup rows (count=60, avg/min/max/p50/p95/p99) for every minute of the 30 days up to 2
  minutes ago (the runner rolls up each finished minute): 62 x ~43k = ~2.7M rows, what
  `compute_rollups` would have written, and the RollupQuarter rows it builds from them (~180k);
- raw 1-second Sample rows for the newest `raw_hours` hours (62 x 3,600 x h rows; 1.3M at 6 h):
  what short windows read and what the last unrolled minutes of a long window read (older raw
  samples would only deepen the index, which the 7-day read never touches);
- 120 events over the 30 days (OOMs, retractions, relaunches) so the charts carry event rules.

What it measures, in headless Chromium (Debian's /usr/bin/chromium) against `streamlit run
app.py` on 127.0.0.1 (the Streamlit server and the browser share the machine's cores):
- first paint: a fresh browser profile, `page.goto(/server?server=srv-a&window=7d)` -> the first
  Vega chart has drawn its pixels on its canvas (polled every 25 ms), and -> all 6 charts drawn.
  Runs are 11 s apart so the page's 10-s query cache has expired: every run pays the SQL;
- return_visit: the same page opened again 11 s later in the same profile (Streamlit's JS comes
  from the HTTP cache; the SQL is paid again), to the first chart drawn;
- rerun (once the page has settled: the Server view's GPU wall and Doctor draw LATER_S after
  the charts): click the "Mark events" toggle (a fragment rerun: the controls live in the charts'
  fragment; the chart specs do not change, so each of the 6 charts swaps its events dataset)
  -> the last mutation inside any chart (a MutationObserver; done = 400 ms without a change).
  When the click falls after the window's `until` has moved on (a 60-s grid for this window),
  the series are read and sent again too: those are the slower runs in the list;
- rerun_one_chart: switch the GPU metric (a fragment rerun that rebuilds one chart, whose title
  and unit change; the other five swap nothing), measured the same way;
- the server-side part: the page's 7-day read (timeseries.read_series, 31 series), in ms.
Targets: first paint <= 1.5 s, rerun <= 300 ms. Side by side, in the same run, two
peers measured the same way, return visit included: the floor, a one-chart 100-point Streamlit
page (what Streamlit + Chromium cost on this host before Pitwall does anything), and the
six-chart bound, the view's six charts from memory on a bare page (BOUND_APP). Figures print as a table
with the median, every run and the ratio to the floor; each server's first navigation is a
discarded warm-up.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from storage import repo  # noqa: E402
from storage import series_keys as sk  # noqa: E402
from storage.db import make_engine  # noqa: E402

SERVERS = ("srv-a", "srv-b")
GPUS_PER_SERVER = 4
SERVER_SERIES = (
    # metric, base, amplitude, noise (base units)
    (sk.LOG_RUNNING_REQ, 24.0, 16.0, 4.0),
    (sk.LOG_QUEUE_REQ, 3.0, 3.0, 2.0),
    (sk.LOG_TOKEN_USAGE, 0.55, 0.25, 0.05),
    (sk.LOG_GEN_THROUGHPUT_TOK_S, 2400.0, 1200.0, 150.0),
    (sk.LOG_INPUT_THROUGHPUT_TOK_S, 9000.0, 4000.0, 600.0),
    (sk.LOG_CACHE_HIT_RATE, 0.45, 0.15, 0.05),
    (sk.hist_key("ttft", "p50"), 0.08, 0.04, 0.01),
    (sk.hist_key("ttft", "p95"), 0.20, 0.08, 0.02),
    (sk.hist_key("ttft", "p99"), 0.35, 0.15, 0.04),
    (sk.CANARY_TTFT_S, 0.09, 0.05, 0.02),
    (sk.CANARY_E2E_S, 1.2, 0.5, 0.1),
)
GPU_SERIES = (
    ("util_ratio", 0.7, 0.25, 0.05),
    ("mem_used_bytes", 70e9, 5e9, 1e9),
    ("mem_total_bytes", 80e9, 0.0, 0.0),
    ("power_w", 550.0, 120.0, 20.0),
    ("temp_c", 62.0, 8.0, 1.0),
)
N_EVENTS = 60  # per server over the whole span: about one every 12 h
SEEDED_KINDS = ("oom", "decode_retract", "relaunch_done", "health_down", "crash")  # severities: storage/kinds.py


def _series_defs(server_id: int, gpu0: int) -> list[tuple[str, float, float, float]]:
    out = list(SERVER_SERIES)
    for g in range(gpu0, gpu0 + GPUS_PER_SERVER):
        out += [(sk.gpu_key(g, f), b, a, n) for f, b, a, n in GPU_SERIES]
    return out


def _wave(t: np.ndarray, base: float, amp: float, noise: float, rng: np.random.Generator) -> np.ndarray:
    day = 86400.0
    v = base + amp * np.sin(2 * np.pi * t / day) + rng.normal(0.0, noise, t.size) if noise else (
        np.full(t.size, base))
    return np.maximum(v, 0.0)


def generate(db_path: Path, *, days: int, raw_hours: float, now: float) -> dict[str, float]:
    """Write the fixture database; returns timings and row counts."""
    t0 = time.perf_counter()
    engine = make_engine(f"sqlite:///{db_path}")
    rng = np.random.default_rng(7)
    end_min = int(now // 60) * 60
    raw_start = end_min - int(raw_hours * 3600)
    start = end_min - days * 86400
    minutes = np.arange(start, end_min - 120, 60, dtype=float)  # rolled up until 2 min ago
    n_roll = n_raw = 0
    for si, name in enumerate(SERVERS):
        gpu0 = si * GPUS_PER_SERVER
        srv = repo.upsert_server(engine, name=name, base_url=f"http://127.0.0.1:{30000 + si}",
                                 gpu_indices=list(range(gpu0, gpu0 + GPUS_PER_SERVER)),
                                 gpu_hourly_usd=3.8)
        assert srv.id is not None
        repo.create_launch(engine, server_id=srv.id, profile_name="bench", engine_version="0.5.23",
                           status="ready", started_at=start, server_args={"tp_size": GPUS_PER_SERVER})
        for metric, base, amp, noise in _series_defs(srv.id, gpu0):
            avg = _wave(minutes, base, amp, noise, rng)
            spread = noise * 2 + 1e-9
            cols = (avg, avg - spread, avg + spread, avg, avg + spread * 0.8, avg + spread * 0.95)
            rows = [
                {"ts": float(ts), "server_id": srv.id, "metric": metric, "count": 60, "avg": float(a),
                 "min": float(lo), "max": float(hi), "p50": float(p50), "p95": float(p95), "p99": float(p99)}
                for ts, a, lo, hi, p50, p95, p99 in zip(minutes, *cols, strict=True)
            ]
            with engine.begin() as conn:
                n_roll += repo.insert_rollups(conn, rows=rows)
            secs = np.arange(raw_start, now, 1.0)
            vals = _wave(secs, base, amp, noise, rng)
            source = metric.split(".")[0]
            with engine.begin() as conn:
                n_raw += repo.insert_sample_tuples(
                    conn, rows=[(float(t), srv.id, None, source, metric, float(v)) for t, v in zip(secs, vals, strict=True)]
                )
        ev_rows = []
        for k in range(N_EVENTS):
            kind = SEEDED_KINDS[k % len(SEEDED_KINDS)]
            ev_rows.append({"ts": float(start + (k + 0.5) * (now - start) / N_EVENTS), "server_id": srv.id,
                            "launch_id": None, "kind": kind,
                            "message": f"bench {kind} #{k}", "raw": None})
        with engine.begin() as conn:
            repo.insert_events(conn, rows=ev_rows)
    with engine.begin() as conn:  # the 15-minute tier the runner builds from those minutes
        n_quarter = repo.backfill_quarters(conn)
    engine.dispose()
    return {"gen_s": time.perf_counter() - t0, "rollup_rows": n_roll, "quarter_rows": n_quarter, "raw_rows": n_raw,
            "db_mb": db_path.stat().st_size / 1e6}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


PAINTED_JS = """
() => {
  // a chart is painted when its canvas has non-transparent pixels (or its SVG has mark geometry)
  let n = 0;
  for (const el of document.querySelectorAll('[data-testid="stVegaLiteChart"]')) {
    const c = el.querySelector('canvas');
    if (c && c.width && c.height) {
      const d = c.getContext('2d').getImageData(0, Math.floor(c.height / 2), c.width, 2).data;
      for (let i = 3; i < d.length; i += 4) { if (d[i] !== 0) { n += 1; break; } }
      continue;
    }
    const p = el.querySelector('svg .mark-line path, svg .mark-symbol path, svg .mark-rule line');
    if (p && ((p.getAttribute('d') || '').length > 2 || p.tagName === 'line')) n += 1;
  }
  return n;
}
"""
OBSERVE_JS = """
() => {
  window.__pwLast = 0;
  const root = document.querySelector('[data-testid="stMain"]') || document.body;
  if (window.__pwObs) window.__pwObs.disconnect();
  window.__pwObs = new MutationObserver((muts) => {
    for (const m of muts) {
      const t = m.target.nodeType === 1 ? m.target : m.target.parentElement;
      if (t && t.closest && t.closest('[data-testid="stVegaLiteChart"]')) { window.__pwLast = performance.now(); return; }
    }
  });
  window.__pwObs.observe(root, {subtree: true, childList: true, attributes: true, characterData: true});
  return performance.now();
}
"""
SETTLED_JS = "() => !document.body.innerText.includes('draw in a moment, after the charts')"
CLICK_JS = """
(label) => {
  // a toggle's <label>, or a button (segmented control option) with exactly this text
  const el = [...document.querySelectorAll('label')].find(l => l.textContent.trim() === label)
          || [...document.querySelectorAll('button')].find(b => b.textContent.trim() === label);
  const input = el.querySelector('input') || el;
  const t0 = performance.now();
  input.click();
  return t0;
}
"""


def _wait_painted(page, *, want: int, timeout_s: float = 60.0) -> tuple[float, float]:
    """(seconds to the first painted chart, seconds to `want` painted charts) from now."""
    t0 = time.perf_counter()
    first = None
    while time.perf_counter() - t0 < timeout_s:
        n = page.evaluate(PAINTED_JS)
        if n and first is None:
            first = time.perf_counter() - t0
        if n >= want:
            return first or 0.0, time.perf_counter() - t0
        time.sleep(0.025)
    raise TimeoutError(f"only {page.evaluate(PAINTED_JS)} of {want} charts painted in {timeout_s:.0f} s")


def _rerun(page, *, label: str, want: int, quiet_ms: float = 400.0, timeout_s: float = 30.0) -> float:
    """Click a widget; seconds until the last chart mutation (no further change for quiet_ms)."""
    page.evaluate(OBSERVE_JS)
    t0 = page.evaluate(CLICK_JS, label)
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        time.sleep(0.05)
        last, now = page.evaluate("() => [window.__pwLast, performance.now()]")
        if last > t0 and now - last > quiet_ms and page.evaluate(PAINTED_JS) >= want:
            return (last - t0) / 1000.0
    raise TimeoutError(f"charts did not repaint within {timeout_s:.0f} s of clicking {label!r}")


FLOOR_APP = """
import numpy as np, pandas as pd, streamlit as st
on = st.toggle("Mark events", value=True)
df = pd.DataFrame({"x": np.arange(100), "y": np.random.default_rng(0).random(100)})
st.vega_lite_chart(df, {"mark": {"type": "line", "color": "#4e79a7" if on else "#f28e2b"},
    "encoding": {"x": {"field": "x", "type": "quantitative"}, "y": {"field": "y", "type": "quantitative"}},
    "usermeta": {"embedOptions": {"renderer": "canvas"}}}, width="stretch", height=280)
"""

# The six-chart bound: the Server view's six charts (Pitwall's own specs over the same 7-day data,
# read once into memory) on a bare page: no SQL on the critical path, no sidebar, header or panel
# controls. What Streamlit + Vega cost for these charts on this host; the Server view can only
# come close to it.
BOUND_APP = """
import os, sys
sys.path.insert(0, os.environ["PW_BENCH_ROOT"])
import streamlit as st
from storage.db import make_engine
from dashboard.services.views import timeseries as ts
from dashboard.components.timeseries_charts import timeseries_spec
st.set_page_config(layout="wide")
UNITS = {"latency": "s", "throughput": "tok_s", "batch": "count", "token_usage": "ratio",
         "cache_hit": "ratio", "gpu_util": "ratio"}

@st.cache_resource
def charts(on):
    engine = make_engine(os.environ["PW_BENCH_DB"])
    until = float(os.environ["PW_BENCH_NOW"])
    since = until - 7 * 86400
    panels = [p for p in list(ts.PANELS) + ts.gpu_panels([0, 1, 2, 3]) if p.key in UNITS]
    frames = ts.read_series(engine, server_id=1, panels=panels, since=since, until=until)
    events = ts.events_in_window(engine, server_id=1, since=since, until=until) if on else None
    return [(k, timeseries_spec(frames[k], unit=u, since=since, until=until, events=events, title=k))
            for k, u in UNITS.items()]

on = st.toggle("Mark events", value=True)
cols = st.columns(2)
for i, (key, spec) in enumerate(charts(on)):
    with cols[i % 2]:
        st.vega_lite_chart(spec, width="stretch", height=280, key=key)
"""


def measure(
    app: Path, url_path: str, env_extra: dict[str, str], *, want: int, runs: int, cold_gap_s: float,
    shot: Path | None, one_chart: tuple[str, ...] = ("Mark events", "Mark events"),
) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    port = _free_port()
    env = dict(os.environ)
    env.update(env_extra)
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(app), "--server.address", "127.0.0.1",
         "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    out: dict[str, list[float]] = {"first_chart_s": [], "all_charts_s": [], "return_visit_s": [],
                                   "rerun_s": [], "rerun_one_chart_s": []}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path="/usr/bin/chromium",
                args=["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                      "--disable-component-update", "--disable-sync", "--no-first-run"],
            )
            url = f"http://127.0.0.1:{port}{url_path}"
            deadline = time.time() + 60
            while True:  # wait for the server to answer
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        break
                except OSError:
                    if time.time() > deadline:
                        raise RuntimeError("streamlit did not start within 60 s") from None
                    time.sleep(0.2)
            for i in range(runs + 1):  # run 0 is the warm-up (imports, caches of a fresh server)
                if i:
                    time.sleep(cold_gap_s)
                ctx = browser.new_context(viewport={"width": 1280, "height": 900})
                page = ctx.new_page()
                t0 = time.perf_counter()
                page.goto(url, wait_until="commit")
                first, every = _wait_painted(page, want=want)
                nav = time.perf_counter() - t0 - every
                if i:
                    out["first_chart_s"].append(first + nav)
                    out["all_charts_s"].append(every + nav)
                # The reruns are measured on a settled page: the Server view draws its GPU wall
                # and Doctor LATER_S after the charts (a fragment rerun, queued before any click)
                page.wait_for_function(SETTLED_JS, timeout=60_000)
                for _ in range(2):  # toggle off and on: both are reruns that redraw every chart
                    page.wait_for_timeout(500)
                    dt = _rerun(page, label="Mark events", want=want)
                    if i:
                        out["rerun_s"].append(dt)
                for label in one_chart:  # reruns that change one chart (the others stay as drawn)
                    page.wait_for_timeout(500)
                    dt = _rerun(page, label=label, want=want)
                    if i:
                        out["rerun_one_chart_s"].append(dt)
                if shot is not None and i == runs:
                    page.screenshot(path=str(shot), full_page=True)
                # a return visit: same browser profile (Streamlit's JS in the HTTP cache), after
                # the same gap, so the page's query cache has expired again
                page.close()
                time.sleep(cold_gap_s)
                page = ctx.new_page()
                t0 = time.perf_counter()
                page.goto(url, wait_until="commit")
                first, every = _wait_painted(page, want=want)
                if i:
                    out["return_visit_s"].append(first + time.perf_counter() - t0 - every)
                ctx.close()
            browser.close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(15)
    return out


def server_side(db_path: Path, now: float) -> float:
    """The Server page's 7-day query (dashboard/services/views/timeseries.read_series), cold and warm."""
    from dashboard.services.views import timeseries as ts

    engine = make_engine(f"sqlite:///{db_path}")
    panels = list(ts.PANELS) + ts.gpu_panels(list(range(GPUS_PER_SERVER)))
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        data = ts.read_series(engine, server_id=1, panels=panels, since=now - 7 * 86400, until=now)
        times.append(time.perf_counter() - t0)
    n = sum(len(d) for d in data.values())
    print(f"7-day read (read_series): {n:,} points in {len(panels)} panels; "
          f"{', '.join(f'{t * 1000:.0f}' for t in times)} ms")
    engine.dispose()
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--raw-hours", type=float, default=6.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="folder to keep (and reuse) the fixture database in")
    ap.add_argument("--shots", type=Path, default=None, help="folder for a screenshot of the 7-day view")
    args = ap.parse_args()
    if not Path("/usr/bin/chromium").exists():
        print("bench/dashboard_paint.py needs /usr/bin/chromium (apt-get install -y chromium).", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="pitwall-paint-"))
    folder = args.keep or tmp
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / f"paint-{args.days}d-{args.raw_hours:g}h.db"
    now = time.time()
    try:
        stamp = db.with_suffix(".now")  # when the generated data ends (epoch s)
        if db.exists() and stamp.exists() and args.keep:
            now = float(stamp.read_text())
            print(f"reusing {db} ({db.stat().st_size / 1e6:.0f} MB); its data ends {time.time() - now:.0f} s ago")
        else:
            db.unlink(missing_ok=True)
            g = generate(db, days=args.days, raw_hours=args.raw_hours, now=now)
            stamp.write_text(repr(now))
            print(f"generated {g['rollup_rows']:,} minute + {g['quarter_rows']:,} quarter rollup rows + "
                  f"{g['raw_rows']:,} raw samples "
                  f"({g['db_mb']:.0f} MB) in {g['gen_s']:.0f} s")
        server_side(db, now)
        if args.shots:
            args.shots.mkdir(parents=True, exist_ok=True)
        # The floor: a one-chart, 100-point page with the same toggle, same browser, same method;
        # it shows what this host's Streamlit + Chromium cost before Pitwall does anything.
        floor_app = folder / "floor_app.py"
        floor_app.write_text(FLOOR_APP, encoding="utf-8")
        floor = measure(floor_app, "/", {}, want=1, runs=args.runs, cold_gap_s=0.0, shot=None)
        bound_app = folder / "bound_app.py"
        bound_app.write_text(BOUND_APP, encoding="utf-8")
        bound = measure(bound_app, "/", {"PW_BENCH_ROOT": str(ROOT), "PW_BENCH_DB": f"sqlite:///{db}",
                                         "PW_BENCH_NOW": repr(now)},
                        want=6, runs=args.runs, cold_gap_s=0.0, shot=None, one_chart=())
        env = {
            "PITWALL_DATABASE_URL": f"sqlite:///{db}", "PITWALL_DATA_DIR": str(db.parent),
            "PITWALL_MANAGED_RUNNER": "1", "PITWALL_DEMO": "off", "PITWALL_CONFIG": "",
        }
        # 6 charts: TTFT, throughput, batch, KV, cache, GPU (one metric at a time). Runs are 11 s
        # apart, so the page's 10-s query cache has expired and every first paint pays the SQL.
        res = measure(ROOT / "app.py", "/server?server=srv-a&window=7d", env, want=6, runs=args.runs,
                      cold_gap_s=11.0, shot=(args.shots / "bench-server-7d.png") if args.shots else None,
                      one_chart=("GPU memory used", "GPU utilisation"))
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print()
    print("| step (headless Chromium) | 7-day Server view, median | runs | six-chart bound | ratio | "
          "floor page | ratio | target |")
    print("|---|---|---|---|---|---|---|---|")
    targets = {"first_chart_s": "<= 1.5 s", "all_charts_s": "—", "return_visit_s": "—",
               "rerun_s": "<= 0.3 s", "rerun_one_chart_s": "<= 0.3 s"}
    for k, v in res.items():
        med = statistics.median(v)
        fl = statistics.median(floor[k])
        bd = f"{statistics.median(bound[k]):.2f} s | {med / statistics.median(bound[k]):.1f}x" if bound[k] else "— | —"
        print(f"| {k} | {med:.2f} s | {', '.join(f'{x:.2f}' for x in v)} | {bd} | {fl:.2f} s | "
              f"{med / fl:.1f}x | {targets[k]} |")
    print(f"(host load average over 1 min at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
