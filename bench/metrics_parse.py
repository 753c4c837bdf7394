"""Benchmark: `parse_metrics` on a 29 MiB /metrics payload whose last line is bad, vs the floor.

Run: ``.venv/bin/python bench/metrics_parse.py [--mib 29]``

Two payload shapes, each ~29 MiB, each ending with one malformed line (an unclosed label set):

- `many families`: families of 100 series each (what a server with many labelled families sends);
- `one family`: one gauge family with a split label of ~300k values (a label explosion).

Each shape is parsed in a fresh child process (so peak RSS is that parse's own): ours is
`parse_metrics(text)` as the collector calls it; the floor is prometheus_client's parser over the
same payload without its bad line, read whole once (what a clean payload of that size costs with
no cap; the parser stops at the first bad line, so the bad payload cannot be its input);
`uncapped` is ours with the series cap and the CPU budget lifted, to show what the bad line
itself costs (one block read twice). Columns:
CPU seconds, peak RSS (MiB, the payload text itself included, ~29 MiB), samples kept, and the
ratio ours / floor. Run it on two commits to compare before and after a change.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BAD = 'sglang:num_queue_reqs{tp_rank="0" 1.0\n'


def generate(shape: str, mib: float) -> str:
    target = int(mib * 1024 * 1024)
    parts: list[str] = []
    size = 0
    if shape == "one family":
        parts.append("# HELP sglang:num_running_reqs running\n# TYPE sglang:num_running_reqs gauge\n")
        i = 0
        while size < target:
            line = (f'sglang:num_running_reqs{{model_name="m",engine_type="unified",'
                    f'tp_rank="{i}",pp_rank="0",moe_ep_rank="0"}} {i % 7}.0\n')
            parts.append(line)
            size += len(line)
            i += 1
    else:
        f = 0
        while size < target:
            name = f"sglang:family_{f}"
            block = [f"# HELP {name} a family\n# TYPE {name} gauge\n"]
            block += [f'{name}{{model_name="m",engine_type="unified",tp_rank="{i}"}} {i}.0\n'
                      for i in range(100)]
            text = "".join(block)
            parts.append(text)
            size += len(text)
            f += 1
    parts.append(BAD)
    return "".join(parts)


def child(path: str, which: str) -> None:
    text = Path(path).read_text(encoding="utf-8")
    c0, t0 = time.process_time(), time.perf_counter()
    if which in ("ours", "uncapped"):
        from collectors.promtext import ParseLimits, parse_metrics

        lim = ParseLimits(max_series=10**9, budget_s=1e9) if which == "uncapped" else None
        parsed = parse_metrics(text, lim) if lim else parse_metrics(text)
        kept, errors = len(parsed.samples), len(parsed.errors)
    else:
        from prometheus_client.parser import text_string_to_metric_families

        clean = text[: len(text) - len(BAD)]
        kept = sum(len(f.samples) for f in text_string_to_metric_families(clean))
        errors = 0
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB (Linux)
    print(json.dumps({"cpu": cpu, "wall": wall, "rss": peak, "kept": kept, "errors": errors}))


def run(path: Path, which: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--child", str(path), which], check=True,
                         capture_output=True, text=True, cwd=ROOT)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=29.0)
    ap.add_argument("--no-uncapped", action="store_true",
                    help="leave out the uncapped row (a parser without ParseLimits)")
    ap.add_argument("--child", nargs=2, metavar=("FILE", "WHICH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return 0
    print(f"{'payload':<14}{'parser':<10}{'cpu s':>8}{'wall s':>8}{'peak MiB':>10}{'kept':>10}"
          f"{'errors':>8}{'cpu ratio':>11}{'rss ratio':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        for shape in ("many families", "one family"):
            path = Path(tmp) / "payload.prom"
            path.write_text(generate(shape, args.mib), encoding="utf-8")
            floor = run(path, "floor")
            ours = run(path, "ours")
            rows = [("floor", floor), ("ours", ours)]
            if "--no-uncapped" not in sys.argv:
                rows.append(("uncapped", run(path, "uncapped")))
            for label, r in rows:
                ratio_c = r["cpu"] / floor["cpu"] if floor["cpu"] else float("nan")
                ratio_m = r["rss"] / floor["rss"]
                print(f"{shape:<14}{label:<10}{r['cpu']:>8.2f}{r['wall']:>8.2f}{r['rss']:>10.0f}"
                      f"{int(r['kept']):>10,}{int(r['errors']):>8}{ratio_c:>11.2f}{ratio_m:>11.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
