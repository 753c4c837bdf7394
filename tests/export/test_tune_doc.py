"""A tune run's review document (export/tune_doc.py), Markdown and HTML, from
the recorded tune result of the Tune page's test (figures of a real `pitwall tune demo` run) in
a real SQLite database: ranking, reasons, winner diff, sources, the Pareto chart inline, the
audit row; hostile profile names stay text."""

from __future__ import annotations

import pytest
from pages.test_tune_page import RESULT

from export import tune_doc
from storage import repo


def _seed(engine, result: dict) -> int:
    srv = repo.upsert_server(engine, name="demo", base_url="http://127.0.0.1:1", managed=True, profile="demo")
    for name, extra in (("demo", {}), ("demo-radix-off", {"disable-radix-cache": True})):
        repo.upsert_profile(engine, name=name, model_path="m", entrypoint="simulator.launch_server",
                            flags={"max-running-requests": 64, **extra}, env={})
    intent = repo.create_intent(engine, kind="tune", server_id=srv.id, requested_by="tester",
                                payload={"server": "demo", "profiles": [c["profile"] for c in result["candidates"]],
                                         "sweep": {"levels": [4.0], "requests": 40}})
    repo.update_intent(engine, intent_id=intent.id, state="done", result=result)
    return int(intent.id or 0)


def test_markdown_document_ranks_explains_and_cites(engine) -> None:
    tid = _seed(engine, RESULT)
    text = tune_doc.tune_document(engine, tid, "md", actor="tester").decode()
    assert text.startswith(f"# Tune R-{tid} of demo")
    assert "| winner | demo |" in text and "| workload fingerprint | c5a51946a0c122d4 |" in text
    ranking = text.split("## Ranking", 1)[1].split("##", 1)[0]
    assert ranking.index("| 1 | demo |") < ranking.index("| 2 | demo-radix-off | slo_missed")
    assert "exited with code 1" in ranking
    assert "flags.disable-radix-cache" in text.split("Winner against", 1)[1]
    assert "| demo-radix-off | 4 | 4 |" in text  # launch and probe run of each candidate
    audit = [a for a in repo.list_audit(engine) if a.action == "export"]
    assert len(audit) == 1 and audit[0].detail == {"format": "md", "tune": tid}


def test_html_document_is_one_file_with_the_pareto_chart_and_escapes_names(engine) -> None:
    hostile = {**RESULT, "candidates": [*RESULT["candidates"][:2],
                                        {**RESULT["candidates"][2], "profile": "<script>x</script>"}]}
    tid = _seed(engine, hostile)
    page = tune_doc.tune_document(engine, tid, "html", actor="tester").decode()
    assert page.startswith("<!doctype html>") and "<svg" in page and "Cost vs p99 latency" in page
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "http://" not in page.split("<svg", 1)[0].replace('http://127.0.0.1:1', "")


def test_unknown_run_or_format_says_what_to_do(engine) -> None:
    with pytest.raises(ValueError, match="No tune R-99"):
        tune_doc.tune_document(engine, 99, "md", actor="tester")
    with pytest.raises(ValueError, match="use one of md, html"):
        tune_doc.tune_document(engine, 1, "pdf", actor="tester")
    assert tune_doc.tune_filename(7, "demo box", "html") == "pitwall-tune7-demo_box.html"


def test_a_tie_leads_the_document_and_crowns_no_one(engine) -> None:
    from pages.test_tune_page import TIE

    tid = _seed(engine, TIE)
    text = tune_doc.tune_document(engine, tid, "md", actor="tester").decode()
    lead = text.split("## Ranking", 1)[0]
    assert "demo-radix-off and demo tie: goodput 5.96 vs 5.95 req/s" in lead.replace("\\", "")
    assert "| winner | none |" in text and "Winner against" not in text
    page = tune_doc.tune_document(engine, tid, "html", actor="tester").decode()
    assert page.index("tie: goodput") < page.index("<h2>Ranking</h2>") and "Goodput and its measured spread" in page
