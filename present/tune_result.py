"""A tune run as it reads: its verdict and winner, the ranking, goodput and Pareto tables, the
winner's profile diff. Shared by the Tune page, `pitwall tune` and the tune's review document
(export/tune_doc.py); a tune is requested and followed by dashboard/services/tune.py and run by
runner/tunes.py, which ranks it (runner/tune_rank.py: `public_json` is the result read here).

Units: goodput in requests/s (requests meeting the SLO per second), latency columns in ms
(`p99 TTFT ms`, `p99_ms`; the result stores seconds), cost in USD per 1M output tokens (LLM) or
per image (image servers), elapsed time in seconds. Missing figures are None, never 0.
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd
from sqlalchemy.engine import Engine

from launching.profiles import diff
from present import shown
from runner import tune_rank
from storage import repo
from storage.models import Intent


def elapsed_s(intent: Intent) -> float | None:
    if intent.started_at is None:
        return None
    return (intent.finished_at or time.time()) - intent.started_at


def verdict(result: dict[str, Any]) -> tune_rank.Verdict | None:
    """What a tune concludes (runner/tune_rank.py state_verdict): a winner, or a tie said in words."""
    return tune_rank.state_verdict(result)


def winner(result: dict[str, Any]) -> str | None:
    """The profile a tune crowned; None for a tie, no candidate within the SLO, or not ranked yet."""
    said = verdict(result)
    return said.winner if said is not None else None


def spread_text(spread: Any) -> str | None:
    """'5.70–6.20' for a [lo, hi] goodput spread, None when not measured."""
    if isinstance(spread, list) and len(spread) == 2:
        return f"{min(spread):.2f}–{max(spread):.2f}"
    return None


def ranking_frame(result: dict[str, Any]) -> pd.DataFrame:
    """One row per candidate in rank order: status, goodput, p99 TTFT/ITL, throughput, cost, errors."""
    rows = []
    for c in tune_rank.public_json(result)["candidates"]:
        sc = c.get("scorecard") or {}
        lat, tp, cost, st = (sc.get(d) or {} for d in ("latency", "throughput", "cost", "stability"))
        rows.append({"rank": c.get("rank"), "profile": c["profile"], "status": c["status"],
                     "goodput req/s": c.get("goodput_rps"), "goodput spread": spread_text(c.get("goodput_spread")),
                     "p99 TTFT ms": _ms(lat.get("ttft_p99_s")),
                     "p99 ITL ms": _ms(lat.get("itl_p99_s")), "output tok/s": tp.get("output_tok_s"),
                     "USD / 1M out": cost.get("usd_per_1m_output_tok"), "errors": st.get("error_count"),
                     "reason": c.get("reason") or ""})
    return pd.DataFrame(rows, columns=["rank", "profile", "status", "goodput req/s", "goodput spread",
                                       "p99 TTFT ms", "p99 ITL ms",
                                       "output tok/s", "USD / 1M out", "errors", "reason"])


def _ms(v: Any) -> float | None:
    return float(v) * 1000.0 if isinstance(v, (int, float)) else None


def pareto_frame(result: dict[str, Any]) -> pd.DataFrame:
    """Scored candidates as points: cost (USD / 1M output tokens, or per image) vs p99 latency (ms)."""
    image = bool(result.get("image"))
    best = winner(result)
    rows = []
    for c in tune_rank.public_json(result)["candidates"]:
        sc = c.get("scorecard") or {}
        cost = (sc.get("cost") or {}).get("usd_per_image" if image else "usd_per_1m_output_tok")
        p99 = (sc.get("latency") or {}).get("image_p99_s" if image else "ttft_p99_s")
        if isinstance(cost, (int, float)) and isinstance(p99, (int, float)):
            rows.append({"profile": c["profile"], "status": c["status"], "cost": float(cost),
                         "p99_ms": float(p99) * 1000.0, "winner": c["profile"] == best})
    return pd.DataFrame(rows, columns=["profile", "status", "cost", "p99_ms", "winner"])


def goodput_frame(result: dict[str, Any]) -> pd.DataFrame:
    """Candidates that met the SLO: goodput (req/s), its spread lo/hi (the goodput itself when not
    measured) and role: winner, tie (tied at the top) or other."""
    said = verdict(result)
    tied = set(said.tied) if said is not None else set()
    best = said.winner if said is not None else None
    rows = []
    for c in tune_rank.public_json(result)["candidates"]:
        rps = c.get("goodput_rps")
        if c.get("status") != "ok" or not isinstance(rps, (int, float)):
            continue
        sp = c.get("goodput_spread") if isinstance(c.get("goodput_spread"), list) else [rps, rps]
        role = "winner" if c["profile"] == best else "tie" if c["profile"] in tied else "other"
        rows.append({"profile": c["profile"], "goodput_rps": float(rps), "lo": float(min(sp)), "hi": float(max(sp)),
                     "role": role})
    return pd.DataFrame(rows, columns=["profile", "goodput_rps", "lo", "hi", "role"])


def slo_line_ms(result: dict[str, Any]) -> float | None:
    slo = result.get("slo") or {}
    v = slo.get("image_p99_s" if result.get("image") else "ttft_p99_s")
    return float(v) * 1000.0 if isinstance(v, (int, float)) else None


def winner_diff(engine: Engine, result: dict[str, Any]) -> pd.DataFrame | None:
    """The winner's profile against the original one (setting, original, winner); None without both."""
    a_name, b_name = result.get("original_profile"), winner(result)
    a = repo.get_profile(engine, name=a_name) if a_name else None
    b = repo.get_profile(engine, name=b_name) if b_name else None
    if a is None or b is None:
        return None
    return shown.diff_frame(diff(a.model_dump(), b.model_dump()), f"current ({a.name})", f"winner ({b.name})")
