"""The real SGLang 0.5.23 server's own request records as a trace: the tier's shared server, started
with `--log-requests --log-requests-level 2` and `--export-metrics-to-file` (tests/real_sglang/
conftest.py); a stored probe run at level 2, then level 0 through /configure_logging (two levels in
one log; level 2 again when the module ends); `trace cut` (collectors/trace/cut.py) of both
records from the moment the run began, the export found where the server's /server_info says it
writes (the server served the tier's other modules before); the trace has the run's request
count, token counts and arrival order; replaying it reproduces the token counts."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from collectors.probe.cli import probe_cli
from collectors.trace.cut import cut
from collectors.trace.replay import ReplayOptions
from collectors.trace.replay_run import load, run
from storage import repo
from storage.db import make_engine

pytestmark = [pytest.mark.real_sglang, pytest.mark.slow, pytest.mark.timeout(900)]


def _log_requests_level(server: Any, level: int) -> None:
    r = httpx.post(f"{server.base_url}/configure_logging", json={"log_requests": True, "log_requests_level": level},
                   timeout=60)
    assert r.status_code == 200, r.text


@pytest.fixture(scope="module")
def recorded(real_server: Any) -> Iterator[Any]:
    """The shared server, back at its launch's level 2 after the module."""
    try:
        yield real_server
    finally:
        _log_requests_level(real_server, 2)


def _probe(capsys: pytest.CaptureFixture[str], url: str, db: str, *args: str) -> dict[str, Any]:
    rc = probe_cli(["--url", url, "--no-progress", "--json", "--db", db, "--timeout", "300", *args])
    out = capsys.readouterr().out
    assert rc == 0, out
    return dict(json.loads(out))


def test_a_trace_cut_from_the_servers_records_is_what_the_run_sent(
        recorded: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server, since = recorded, time.time()
    db = f"sqlite:///{tmp_path / 'pitwall.db'}"
    engine = make_engine(db)
    common = ["--prompt-set", "synthetic", "--input-tokens", "24", "--max-new-tokens", "6", "--ignore-eos",
              "--warmup", "0", "--concurrency", "2"]
    first = _probe(capsys, server.base_url, db, *common, "--num-prompts", "4", "--requests", "4")
    _log_requests_level(server, 0)
    second = _probe(capsys, server.base_url, db, *common, "--num-prompts", "3", "--input-tokens", "40", "--requests", "3")
    assert first["levels"] and second["levels"]
    runs = []
    for stored in sorted(repo.list_probe_runs(engine), key=lambda run: run.id):
        rows = repo.probe_requests(engine, run_id=stored.id)
        runs.append(sorted((int(a), int(b)) for a, b in zip(rows["tokens_in"], rows["tokens_out"], strict=True)))

    # `pitwall trace cut`'s own lookup: the server's log, and the export folder its launch reports
    # in /server_info (what Pitwall's API collector stores as the launch's server args); the
    # server served the tier's other modules before, so the window starts at this run
    srv = repo.upsert_server(engine, name="real", base_url=server.base_url, managed=False, log_path=str(server.log_path))
    info = httpx.get(f"{server.base_url}/server_info", timeout=60).json()
    assert info["export_metrics_to_file"] is True and info["export_metrics_to_file_dir"] == str(server.export_dir)
    repo.create_launch(engine, server_id=srv.id, status="ready", server_args=info)
    log = cut(engine, "real", since_s=time.time() - since, requests_dir=tmp_path / "requests", name="from-log",
              source="log")
    metrics = cut(engine, "real", since_s=time.time() - since, requests_dir=tmp_path / "requests",
                  name="from-export", source="metrics")
    for built in (log, metrics):
        reqs = built.trace.requests
        print(built.trace.format, built.fields["requests"], built.trace.notes, built.fields["bad_rows"][:3])
        assert built.fields["bad_count"] == 0
        assert len(reqs) == 7
        got = [(r.input_tokens, r.output_tokens) for r in reqs]
        # the first run's requests arrived before the second's; two in flight at once may swap
        assert sorted(got[:4]) == runs[0] and sorted(got[4:]) == runs[1]
        assert all(r.output_tokens == 6 and r.api == "generate" for r in reqs)
    # level 2 lines carry the sampling params, level 0 lines do not
    assert [r.sampling is not None for r in log.trace.requests] == [True] * 4 + [False] * 3

    trace, requests = load(engine, "from-log")
    run_id, rep = run(engine, url=server.base_url, trace=trace, requests=requests,
                      options=ReplayOptions(speed=1.0, timeout_s=300))
    assert rep["ok"] == 7 and rep["tokens_out"] == sum(r.output_tokens or 0 for r in requests)
    replayed = repo.probe_requests(engine, run_id=run_id)
    assert sorted(replayed["tokens_out"]) == sorted(r.output_tokens for r in requests)  # exact: ignore_eos
    # prompts are synthetic words sized by the measured tokens a word: the server's count lands near the
    # trace's, within what words of a small tokenizer vary (about 3 tokens a word, some 1, some 6)
    assert any("tokens a word" in n for n in rep["notes"]), rep["notes"]
    got, want = sorted(replayed["tokens_in"]), sorted(r.input_tokens for r in requests)
    assert abs(sum(got) - sum(want)) <= 0.1 * sum(want), (got, want)
    assert all(abs(g - w) <= 0.3 * w for g, w in zip(got, want, strict=True)), (got, want)
