"""The check lane's progress line names the server's engine (display_name), not a fixed one."""

from __future__ import annotations

from pathlib import Path

import pytest
import toy_engine

from collectors.engines import ENGINES
from runner.validation import Validations
from storage import repo
from storage.db import make_engine


@pytest.mark.parametrize(("engine_name", "shown"), [("toy", "Toy"), ("sglang", "SGLang")])
def test_the_progress_line_names_the_servers_engine(tmp_path: Path, monkeypatch, engine_name: str, shown: str) -> None:
    monkeypatch.setitem(ENGINES, "toy", toy_engine.ENGINE)
    db = make_engine(f"sqlite:///{tmp_path / 'p.db'}")
    server = repo.upsert_server(db, name="s", base_url="http://127.0.0.1:9", engine=engine_name)
    intent = repo.create_intent(db, kind="validate", server_id=server.id, payload={"profile": "p", "server": "s"})
    seen: list[str] = []

    def validator(profile: str, server_name: str | None, actor: str) -> dict:
        got = repo.get_intent(db, intent_id=intent.id)
        assert got is not None
        seen.append((got.progress or {}).get("detail", ""))
        return {"ok": True, "checked_by": "t", "issues": []}

    Validations(db, validator).handle(intent)
    assert seen == [f"checking p for s: flags ({shown}'s parser when installed), env, guardrails"]
