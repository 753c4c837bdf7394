"""Meta-tests of the one table of sample series keys (storage/series_keys.py SERIES_KEYS):
- no module outside tests/ spells a key, a key family's fixed prefix, or builds a key by hand
  from a source prefix (`f"gpu.{i}.power_w"`): each key's literal lives in the table alone;
- every key the real writers emit, fed real inputs (the SGLang log, /metrics and /v1/loads
  fixtures, every GPU field of a card and of a MIG instance), is an entry of the table.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from collectors.base import ServerTarget
from collectors.gpu import readings_to_samples
from collectors.gpu_nvml import GPM_METRICS, GpuReading, gpm_base_units
from collectors.promtext import parse_metrics
from collectors.sglang.api_parse import parse_loads
from collectors.sglang.log import records_to_rows
from collectors.sglang.log_stream import parse_stream
from collectors.sglang.metrics_window import window
from storage import series_keys
from storage.series_keys import SERIES_KEYS

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures"
TABLE = REPO / "storage" / "series_keys.py"
#: not scanned: the tests, and the simulator (SGLang's double spells SGLang's own names)
SKIP_DIRS = {"tests", "simulator", ".venv", "node_modules", "__pycache__"}
#: the literal start of an f-string that builds a key by hand from a source prefix (`f"gpu.{i}."`)
BUILT = re.compile(r"(?:log|metrics|api|canary|gpu|self|prometheus)\.[a-z0-9_.]*")


def _files() -> list[Path]:
    return [p for p in sorted(REPO.rglob("*.py"))
            if not SKIP_DIRS & set(p.relative_to(REPO).parts) and not any(
                part.startswith(".") for part in p.relative_to(REPO).parts)]


def _strings(tree: ast.AST) -> list[tuple[int, str, bool]]:
    """(line, text, built) of every string constant that is not a docstring; `built`: the first
    literal part of an f-string (what a key built by hand starts with)."""
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
    out = []
    in_fstring = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = node.values
            for p in parts:
                in_fstring.add(id(p))
            if parts and isinstance(parts[0], ast.Constant) and isinstance(parts[0].value, str) and len(parts) > 1:
                out.append((node.lineno, parts[0].value, True))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                and id(node) not in in_fstring):
            out.append((node.lineno, node.value, False))
    return out


def _forbidden_prefixes() -> tuple[str, ...]:
    """Fixed texts a key of a family starts with, specific enough to be nothing but a key: a
    pattern's text before its first placeholder when it names more than the source, the
    diffusion families and every histogram stem (+ "_")."""
    out = {series_keys.LOG_DIFFUSION_PREFIX, series_keys.METRICS_DIFFUSION_PREFIX}
    out.update(stem + "_" for stem in series_keys.HIST_STEMS)
    for e in SERIES_KEYS.values():
        if e.pattern:
            fixed = e.key.split("<", 1)[0]
            if fixed.count(".") >= 2:
                out.add(fixed)
    return tuple(sorted(out))


def _spells(text: str, keys: set[str], prefixes: tuple[str, ...]) -> str | None:
    if text in keys:
        return text
    for p in prefixes:
        if text.startswith(p):
            return p
    m = re.match(r"[a-z]+\.[a-z0-9_]+", text)
    if m and m.group(0) in keys and re.fullmatch(r"[a-z]+\.[a-z0-9_]+[.{]?.*", text) and (
            len(text) == m.end() or text[m.end()] in ".{"):
        return m.group(0)  # a key with a detail suffix spelled out (`log.running_req.dp0`)
    return None


def test_no_module_spells_a_series_key_outside_the_table():
    exact = {k for k, e in SERIES_KEYS.items() if not e.pattern}
    prefixes = _forbidden_prefixes()
    found: list[str] = []
    in_table: dict[str, int] = {}
    for path in _files():
        rel = path.relative_to(REPO).as_posix()
        for line, text, built in _strings(ast.parse(path.read_text(encoding="utf-8"))):
            if path == TABLE:
                if text in exact:
                    in_table[text] = in_table.get(text, 0) + 1
                continue
            hit = _spells(text, exact, prefixes)
            if hit is not None:
                found.append(f"{rel}:{line} spells {hit!r}")
            elif built and BUILT.fullmatch(text):
                found.append(f"{rel}:{line} builds a key from {text!r} by hand")
    assert not found, ("series keys spelled outside storage/series_keys.py (import its constants and "
                       "helpers instead):\n" + "\n".join(found))
    twice = {k: n for k, n in in_table.items() if n > 1}
    assert not twice, f"keys spelled more than once in the table: {twice}"


def _unknown(keys: set[str]) -> list[str]:
    return sorted(k for k in keys if series_keys.entry(k) is None)


P = "[02-15 13:22:25] "  # the diffusion server's prefix
#: lines no fixture log holds: a DP rank's decode line and every diffusion record (SGLang's forms,
#: as tests/collectors/sglang/test_sglang_log_diffusion.py reads them)
EXTRA_LINES = [
    "[2026-01-02 03:04:05 DP1 TP8] Decode batch, #running-req: 7, token usage: 0.40, #queue-req: 2, "
    "gen throughput (token/s): 120.50, \n",
    P + "[TextEncodingStage] finished in 0.0500 seconds\n",
    P + "[DenoisingStage] average time per step: 0.4473 seconds\n",
    P + "[DenoisingStage] finished in 22.3650 seconds\n",
    P + "Peak memory usage: 2048.00 MB\n",
    P + "Peak GPU memory: 64.58 GB, Peak allocated: 60.10 GB, Memory pool overhead: 4.48 GB (6.9%), "
        "Remaining GPU memory at peak: 15.07 GB. x\n",
    P + "Pixel data generated successfully in 26.03 seconds\n",
    P + "Completed batch processing. Generated 2 outputs in 52.00 seconds\n",
    P + "Warmed-up request processed in 25.10 seconds (with warmup excluded)\n",
    P + "Memory usage - Max peak: 26426.31 MB, Avg peak: 20000.00 MB\n",
    "fsm_cache_hit_rate: 50.00%. fsm_cache_avg_init_time: 0.12s. ff_cache_hit_rate: 25.00%. "
    "ff_cache_avg_init_time: 0.00s.\n",
]


def test_every_key_the_log_parser_writes_is_in_the_table():
    server = ServerTarget(1, "s", "http://127.0.0.1:1", managed=False)
    seen: set[str] = set()
    logs = sorted(FIX.glob("*.log"))
    assert len(logs) >= 8
    for path in logs:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
        records = list(parse_stream([*lines, *EXTRA_LINES]))
        seen |= {s.metric for s in records_to_rows(records, server, 1.8e9).samples}
    assert {"log.running_req.dp1", "log.diffusion.stage_s.DenoisingStage", "log.prefill_cached_token",
            "log.diffusion.batch_avg_peak_mem_gb", "log.fsm_cache_hit_rate"} <= seen
    assert _unknown(seen) == []


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("sglang-*metrics.prom")))
def test_every_key_the_metrics_window_writes_is_in_the_table(name):
    text = (FIX / name).read_text(encoding="utf-8")
    zero = re.sub(r"^(sglang[:_]\S*(?:_total|_bucket|_sum|_count)(?:\{[^}]*\})?) \S+$", r"\1 0.0", text,
                  flags=re.M)
    first = window(parse_metrics(zero), None, 100.0)
    values = window(parse_metrics(text), first.state, 110.0).values
    assert values
    assert _unknown(set(values)) == []


def test_every_key_the_api_collector_writes_is_in_the_table():
    loads = json.loads((FIX / "sglang-0.5.23-real-cpu-v1_loads.json").read_text(encoding="utf-8"))
    two_ranks = {"loads": [{"dp_rank": 0, "num_running_reqs": 1, "token_usage": 0.1},
                           {"dp_rank": 1, "num_running_reqs": 2, "token_usage": 0.3}]}
    get_load = [{"dp_rank": 0, "num_reqs": 3, "num_waiting_reqs": 1, "num_tokens": 9, "num_pending_tokens": 2}]
    seen = set(parse_loads(loads)) | set(parse_loads(two_ranks)) | set(parse_loads(get_load))
    assert "api.num_running_reqs.dp1" in seen
    assert _unknown(seen | {series_keys.API_HEALTH_OK, series_keys.API_HEALTH_LATENCY_S}) == []


def test_every_key_the_gpu_collector_writes_is_in_the_table():
    full = {f: 1.0 for f in GpuReading.__dataclass_fields__ if f.endswith(("_ratio", "_bytes", "_w", "_j", "_c",
                                                                          "_hz", "_s", "corrected"))}
    card = GpuReading(0, **full, pstate=0.0, clock_event_reasons=4, processes=[(11, 5.0)],
                      gpm=gpm_base_units(dict.fromkeys(GPM_METRICS, 50.0)))
    mig = GpuReading(0, mem_used_bytes=1.0, mig_id=3, gpm=gpm_base_units(dict.fromkeys(GPM_METRICS, 5.0)))
    server = ServerTarget(1, "s", "http://127.0.0.1:1")
    seen = {s.metric for s in readings_to_samples([card, mig], [server], 1.0, {11: 1})}
    assert {"gpu.0.server_mem_bytes", "gpu.0.gpm.nvlink_rx_bytes_s", "gpu.0.mig3.mem_used_bytes"} <= seen
    assert _unknown(seen) == []


def test_every_entry_names_a_known_unit_and_writer():
    from storage.units import UNITS
    bad = [e.key for e in SERIES_KEYS.values()
           if (e.unit and e.unit not in UNITS) or e.writer not in series_keys.WRITERS or not e.meaning]
    assert bad == []
