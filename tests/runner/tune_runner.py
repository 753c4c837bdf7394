"""A runner in its own process for tests/runner/test_tune.py: supervisor and intent lanes only
(no collectors), so the test can SIGKILL it mid-tune. argv: DB_URL PROFILES_DIR DATA_DIR."""

from __future__ import annotations

import sys
from pathlib import Path

from cli.wiring import runner_parts
from config.settings import Settings
from runner.loop import Runner
from storage.db import make_engine


def main() -> None:
    url, profiles, data = sys.argv[1:4]
    engine = make_engine(url)
    settings = Settings(data_dir=Path(data), database_url=url, profiles_dir=Path(profiles))
    supervisor, handlers = runner_parts(settings, engine, auto_start=False)
    Runner(engine, [], supervisor=supervisor, intent_handlers=handlers, tick_s=0.05).run()


if __name__ == "__main__":
    main()
