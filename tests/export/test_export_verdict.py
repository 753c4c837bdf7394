"""Review exports lead with the verdict: grades and deltas first, then figures, then
provenance (workload, server args) folded; each server's GPU line names its own GPUs; chart
legends read in words (the Server page's series labels), never internal keys."""

from __future__ import annotations

import json
import re

import pytest
from gpu_seed import FIXTURES, MIG_FIXTURE, T0, store_dcgm
from scorecard_seed import seed_alpha, seed_levels

from export import formats
from export.charts import card_charts, export_spec
from scorecard.build import build_scorecard
from storage import repo


@pytest.fixture
def cards(engine):
    a = seed_alpha(engine, name="a")
    b = seed_alpha(engine, name="b", ttft_scale=2.0)
    return [build_scorecard(engine, run_id=a["run_id"], settings_slo={"ttft_p99_s": 0.5}),
            build_scorecard(engine, run_id=b["run_id"], settings_slo={"ttft_p99_s": 0.5})]


def _before(text: str, *needles: str) -> None:
    """Each needle occurs in `text`, each first occurrence after the one before it."""
    at = [text.find(n) for n in needles]
    assert -1 not in at, dict(zip(needles, at, strict=True))
    assert at == sorted(at), dict(zip(needles, at, strict=True))


# ---------------------------------------------------------------------------------------------
# order: verdict, figures, provenance


def test_markdown_puts_grades_before_figures_before_provenance(cards):
    md = formats.render("md", cards[:1]).decode()
    _before(md, "## Grades", "| Latency | PASS |", "## Latency", "TTFT p50", "## Provenance",
            "Workload spec", "Server args", "chunked_prefill_size")
    assert md.rstrip().endswith(md[md.index("## Provenance"):].rstrip())  # the final section


def test_html_puts_grades_before_figures_and_folds_provenance(cards):
    html = formats.render("html", cards[:1]).decode()
    _before(html, 'data-dimension="latency"', 'id="latency"', 'data-chart=', "<details",
            "Workload spec", "chunked_prefill_size")
    folded = html[html.index("<details"):html.index("</details>")]
    assert "Server args" in folded and "Workload" in folded
    assert "chunked_prefill_size" not in html[:html.index("<details")]


def test_comparison_leads_with_its_verdict_naming_what_it_compares(cards):
    a, b = cards
    md = formats.render("md", cards).decode()
    # the verdict line names both sides, then per-metric verdicts, then each card's figures
    _before(md, "## Verdict", f"{b.title} against {a.title}", "TTFT p50", "## Grades",
            "## Deltas", "## Config diff", "# Provenance", "Server args")
    verdict = md[md.index("## Verdict"):md.index("## Grades")]
    assert "Worse:" in verdict and "TTFT p50" in verdict.split("Worse:")[1]
    assert "Same workload" in verdict
    html = formats.render("html", cards).decode()
    _before(html, "Verdict", f"{b.title} against {a.title}", 'data-dimension="latency"',
            "<details", "chunked_prefill_size")


def test_json_leads_with_the_comparison_and_each_card_with_its_grades(cards):
    doc = json.loads(formats.render("json", cards))
    assert list(doc)[:4] == ["schema_version", "kind", "generated_at", "comparison"]
    card = doc["scorecards"][0]
    keys = list(card)
    assert keys.index("dimensions") < keys.index("figures") < keys.index("provenance")
    assert keys[-2:] == ["provenance", "schema_version"]


# ---------------------------------------------------------------------------------------------
# each server its own GPU


def test_two_servers_on_different_gpus_export_each_its_own(engine, tmp_path):
    """One host, two exporters' worth of cards (as the demo: the LLM on GPU 0, the image server on
    GPU 1): the host's `gpu:info` lists both; each scorecard names only its server's card."""
    payload = (FIXTURES / MIG_FIXTURE).read_text()
    payload = re.sub(r'(gpu="0",[^}]*modelName=)"NVIDIA H20"', r'\1"NVIDIA B300"', payload)
    payload = re.sub(r'(gpu="1",[^}]*modelName=)"NVIDIA H20"', r'\1"NVIDIA H200"', payload)
    mixed = tmp_path / "mixed.prom"
    mixed.write_text(payload)
    ids = {}
    for name, gpu in (("llm", 1), ("image", 0)):
        srv = repo.upsert_server(engine, name=name, base_url="http://127.0.0.1:1", kind="llm",
                                 gpu_indices=[gpu])
        ids[name] = int(srv.id)
        store_dcgm(engine, str(mixed), frames=5, server_id=srv.id, gpu_indices=[gpu])
    info = repo.load_state(engine, key="gpu:info")
    assert {g["name"] for g in info["gpus"]} == {"NVIDIA B300", "NVIDIA H200"}  # the host's
    cards = [build_scorecard(engine, server=n, since_s=60, now=T0 + 10) for n in ("llm", "image")]
    assert [c.provenance["gpu_model"] for c in cards] == ["NVIDIA H200", "NVIDIA B300"]
    md = formats.render("md", cards).decode()
    gpu_lines = [line for line in md.splitlines() if line.startswith("| GPU |")]
    assert len(gpu_lines) == 2
    assert "H200" in gpu_lines[0] and "B300" not in gpu_lines[0]
    assert "B300" in gpu_lines[1] and "H200" not in gpu_lines[1]


# ---------------------------------------------------------------------------------------------
# legends in words


def _legend_values(spec: dict) -> set[str]:
    """Every string of the chart's data rows under `metric` (what the colour legend lists)."""
    found: set[str] = set()

    def walk(obj: object) -> None:
        if isinstance(obj, dict):
            if isinstance(obj.get("metric"), str):
                found.add(obj["metric"])
            for v in obj.values():
                walk(v)
        elif isinstance(obj, list):
            for v in obj:
                walk(v)

    walk(spec.get("datasets", {}))
    return found


def test_chart_legends_use_labels_not_keys(cards, engine):
    charts = card_charts(cards[0])
    shown = _legend_values(export_spec(charts["batch_and_queue"]))
    assert shown == {"running", "queued"}
    html = formats.render("html", cards[:1]).decode()
    drawn = "".join(re.findall(r'<div class="chart".*?</svg></div>', html, flags=re.S))
    assert drawn.count("<svg") == 3 and ">queued<" in drawn and ">running<" in drawn
    assert "log." not in drawn and "queue_req" not in drawn and "running_req" not in drawn


def test_png_title_carries_the_grades(cards):
    from export.formats import png_title

    title = png_title(cards[:1])
    assert any("Latency PASS" in line for line in title["subtitle"])



def test_the_export_verdict_is_read_at_a_level_both_ran(engine):
    """The issue's "p50 −66 %" set concurrency 1 against concurrency 2. The export's lead sentence
    is compare.headline at the matched level: baseline 1 and 2 req/s, candidate 4 and 2 req/s at
    concurrency 1 and 2 (each run's own headline level differs); at concurrency 2 TTFT p50 is
    0.50 -> 0.35 s = −30 %, where across levels (0.50 -> 0.20) it would read −60 %."""
    base = {1.0: (1.0, 0.30), 2.0: (0.5, 0.50)}
    cand = {1.0: (0.25, 0.20), 2.0: (0.5, 0.35)}
    a = seed_levels(engine, name="a", levels=base)
    b = seed_levels(engine, name="b", levels=cand, t0=1_700_010_000.0)
    cards = [build_scorecard(engine, run_id=s["run_id"]) for s in (a, b)]
    md = formats.render("md", cards).decode()
    lead = md[md.index("## Verdict"):md.index("## Grades")]
    assert "at concurrency 2: TTFT p50 −30 %" in lead
    assert "−60" not in lead


def test_an_export_of_runs_with_no_shared_level_says_so(engine):
    a = seed_levels(engine, name="a", levels={1.0: (1.0, 0.30), 2.0: (0.5, 0.50)})
    b = seed_levels(engine, name="b", levels={4.0: (0.25, 0.2), 8.0: (0.125, 0.4)},
                    fingerprint="fp-48", t0=1_700_010_000.0)
    cards = [build_scorecard(engine, run_id=s["run_id"]) for s in (a, b)]
    html = formats.render("html", cards).decode()
    assert "ran concurrency 1, 2" in html and "ran concurrency 4, 8" in html
    assert "TTFT p50 −" not in html[:html.index('data-dimension="latency"')]
