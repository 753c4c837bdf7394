"""GPU threshold rules read the GPUs a server's series name (`gpu.<i>.temp_c`, ...), and a
threshold on a series Pitwall never writes is refused when the rule is read, not left silent.

The aliases `gpu_temp_c` and `gpu_mem_used_bytes` once read `gpu.temp_c` / `gpu.mem_used_bytes`,
keys no collector writes (GPU series are per card: `gpu.0.temp_c`), so those rules never saw a
value and never fired. Real SQLite file, real settings from a pitwall.toml, the runner's evaluator.
"""

from __future__ import annotations

import time

import pytest

from cli.wiring import build_evaluator
from config.settings import load_settings
from runner.alerts.rules import AlertRuleError, parse_rule
from storage import repo

RULES = ('[[alerts]]\nname = "hot"\nkind = "threshold"\nmetric = "gpu_temp_c"\nop = ">"\nvalue = 85\n'
         'window_s = 60\n'
         '[[alerts]]\nname = "hot-any"\nkind = "threshold"\nmetric = "gpu.<gpu>.temp_c"\nop = ">"\n'
         'value = 85\nagg = "max"\nwindow_s = 60\n'
         '[[alerts]]\nname = "hot-0"\nkind = "threshold"\nmetric = "gpu.0.temp_c"\nop = ">"\nvalue = 85\n'
         'agg = "max"\nwindow_s = 60\n')


def _settings(tmp_path, text: str):
    (tmp_path / "pitwall.toml").write_text(text, encoding="utf-8")
    return load_settings(env={"PITWALL_CONFIG": str(tmp_path / "pitwall.toml"), "PITWALL_DEMO": "off",
                              "PITWALL_DATA_DIR": str(tmp_path / "data")}, cwd=tmp_path)


def test_gpu_alias_fires_on_the_hottest_card(tmp_path, engine):
    settings = _settings(tmp_path, RULES)
    server = repo.upsert_server(engine, name="prod-a", base_url="http://127.0.0.1:1")
    now = time.time()
    rows = [{"ts": now - 5, "server_id": server.id, "launch_id": None, "source": "gpu", "metric": m, "value": v}
            for m, v in (("gpu.0.temp_c", 70.0), ("gpu.1.temp_c", 91.0), ("gpu.1.power_w", 600.0))]
    with engine.begin() as conn:
        repo.insert_samples(conn, rows=rows)
    verdicts = build_evaluator(settings, engine).evaluate()
    hot = verdicts["hot"]["servers"]["prod-a"]
    assert hot["active"] is True and hot["value"] == 91.0, hot
    assert verdicts["hot-any"]["servers"]["prod-a"]["value"] == 91.0
    hot0 = verdicts["hot-0"]["servers"]["prod-a"]
    assert hot0["active"] is False and hot0["value"] == 70.0, hot0


@pytest.mark.parametrize("metric", ["gpu.temp_c", "log.queue", "gpu.<gpu>.tmp_c"])
def test_a_threshold_on_a_series_never_written_is_refused(metric: str) -> None:
    raw = {"name": "x", "kind": "threshold", "metric": metric, "value": 1}
    with pytest.raises(AlertRuleError, match="is not a series Pitwall writes") as err:
        parse_rule(raw, "alerts[0]")
    assert "gpu.<gpu>.temp_c" in str(err.value)  # the message shows the form that works
