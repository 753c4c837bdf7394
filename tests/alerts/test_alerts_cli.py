"""`pitwall alerts list|silence|test` on a real SQLite file and a loopback webhook."""

from __future__ import annotations

import time

from alert_receivers import Webhook

from cli.main import main
from cli.wiring import build_evaluator
from config.settings import load_settings
from storage import repo
from storage.db import make_engine


def test_list_silence_expire_and_test(data_env, monkeypatch, capsys) -> None:
    hook = Webhook().start()
    monkeypatch.setenv("PITWALL_ALERT_WEBHOOK_URL", hook.url)
    try:
        settings = load_settings()
        engine = make_engine(settings.database_url)
        server = repo.upsert_server(engine, name="prod-a", base_url="http://127.0.0.1:1")
        repo.add_event(engine, kind="oom", server_id=server.id, message="CUDA out of memory", severity="error",
                       ts=time.time() - 1)
        build_evaluator(settings, engine).evaluate()
        assert main(["alerts", "list"]) == 1  # something fires
        out = capsys.readouterr().out
        assert "firing" in out and "oom on prod-a" in out

        assert main(["alerts", "silence", "--server", "prod-a", "--for", "1h"]) == 2  # no reason
        assert "needs a reason" in capsys.readouterr().err
        assert main(["alerts", "silence", "--server", "prod-a", "--for", "1h", "--reason", "known OOM"]) == 0
        sid = int(capsys.readouterr().out.split()[1])
        assert main(["alerts", "list"]) == 1 and "(silenced)" in capsys.readouterr().out
        assert [a.action for a in repo.list_audit(engine)][:1] == ["alert_silence"]
        assert main(["alerts", "silence", "--expire", str(sid)]) == 0
        assert main(["alerts", "silence", "--expire", str(sid)]) == 2  # already ended
        assert repo.list_silences(engine, active_at=time.time()) == []

        capsys.readouterr()
        assert main(["alerts", "test"]) == 0
        assert "webhook: sent" in capsys.readouterr().out
        assert hook.alerts()[0]["labels"]["alertname"] == "PitwallTest"
    finally:
        hook.stop()
    # the receiver gone: `test` says so, without the webhook's secret path
    assert main(["alerts", "test"]) == 1
    out = capsys.readouterr().out
    assert "webhook: FAILED" in out and "SECRETPATH" not in out
