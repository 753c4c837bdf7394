"""Overview: one card per server with status and the latest figures.

Status comes from the newest `api.health_ok` sample (written by the API collector every few
seconds) and the newest Launch row: `launching` while a managed launch is starting, `up` when
the last health check passed within STALE_S, `down` when it failed, `unknown` when there is no
recent health data (runner stopped, or nothing collected yet).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pandas as pd
from sqlalchemy.engine import Engine

from storage import repo

STALE_S = 60.0
KEY_FIGURES = (
    "api.health_ok",
    "api.health_latency_s",
    "log.running_req",
    "log.queue_req",
    "log.gen_throughput_tok_s",
    "log.token_usage",
    "canary.ttft_s",
    "canary.e2e_s",
)


@dataclass
class ServerCard:
    id: int
    name: str
    base_url: str
    kind: str
    managed: bool
    status: str
    profile: str | None
    sglang_version: str | None
    figures: dict[str, float] = field(default_factory=dict)
    events: pd.DataFrame | None = None


def server_cards(engine: Engine, now: float | None = None) -> list[ServerCard]:
    now = time.time() if now is None else now
    cards = []
    for s in repo.list_servers(engine):
        assert s.id is not None
        latest = repo.latest_samples(engine, server_id=s.id, metrics=KEY_FIGURES, max_age_s=STALE_S * 5)
        launch = repo.latest_launch(engine, server_id=s.id)
        health = latest.get("api.health_ok")
        if launch is not None and launch.status == "starting" and launch.ended_at is None:
            status = "launching"
        elif health is None or now - health[0] > STALE_S:
            status = "unknown"
        else:
            status = "up" if health[1] >= 1 else "down"
        cards.append(
            ServerCard(
                id=s.id,
                name=s.name,
                base_url=s.base_url,
                kind=s.kind,
                managed=s.managed,
                status=status,
                profile=(launch.profile_name if launch else None) or s.profile,
                sglang_version=launch.sglang_version if launch else None,
                figures={k: v for k, (_, v) in latest.items()},
                events=repo.list_events(engine, server_id=s.id, limit=5),
            )
        )
    return cards
