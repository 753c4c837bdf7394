"""Disaggregated services: each `[[servers]]` group with a `service` name, joined into one card
(scorecard/service.py) over the Overview's figure window.

A member's figures are the means of its samples in the window (one GROUP BY for every member and
key); the router's per-worker keys are listed per router first (their suffix is the worker URL).
The router's client TTFT p99 is its canary's (the Overview's key figure); the prefill and decode
members' Doctor findings over the window ride along (a light gather: no GPU figures). Members keep
their own Server pages; this only reads.
"""

from __future__ import annotations

import time

from sqlalchemy.engine import Engine

from dashboard.services import doctor
from dashboard.services.views.overview import key_figures
from scorecard import metric_specs as mk
from scorecard.grades import FIGURE_WINDOW_S
from scorecard.service import MEMBER_KEYS, ROUTER_WORKER_PREFIXES, Member, ServiceCard, service_card
from storage import repo
from storage import series_keys as sk
from storage.models import Server

STALE_S = 60.0


def _status(health: tuple[float, float] | None, launch_status: str | None, now: float) -> str:
    if launch_status == "starting":
        return "launching"
    if health is None or now - health[0] > STALE_S:
        return "unknown"
    return "up" if health[1] >= 1 else "down"


def service_cards(engine: Engine, now: float | None = None, window_s: float = FIGURE_WINDOW_S) -> list[ServiceCard]:
    """One card per service named in the configuration, members in role order."""
    now = time.time() if now is None else now
    since = now - window_s
    groups: dict[str, list[Server]] = {}
    for s in repo.list_servers(engine):
        if s.service and s.role:
            groups.setdefault(s.service, []).append(s)
    if not groups:
        return []
    members = [s for group in groups.values() for s in group]
    keys = set(MEMBER_KEYS)
    for s in members:
        if s.role == "router" and s.id is not None:
            for prefix in ROUTER_WORKER_PREFIXES:
                keys.update(repo.series_names(engine, server_id=s.id, prefix=prefix))
    sums = repo.fleet_aggregates(engine, metrics=sorted(keys), since=since, until=now)
    health = repo.fleet_latest(engine, metrics=[sk.API_HEALTH_OK], since=since)
    launches = repo.fleet_latest_launches(engine)
    cards = []
    for name, group in sorted(groups.items()):
        out = []
        for s in sorted(group, key=lambda x: ("router", "prefill", "decode").index(x.role or "router")):
            assert s.id is not None
            values = {k: total / n for (sid, k), (n, total, _) in sums.items() if sid == s.id and n}
            launch = launches.get(s.id)
            client = key_figures(engine, s, now).get(mk.TTFT_P99_S) if s.role == "router" else None
            ev = doctor.gather(engine, s.name, since=since, until=now, light=True) if s.role != "router" else None
            findings = tuple((f.title, f.evidence) for f in doctor.diagnose(ev)) if ev is not None else ()
            out.append(Member(s.name, s.role or "", _status(health.get((s.id, sk.API_HEALTH_OK)),
                                                            launch.status if launch and launch.ended_at is None else None, now),
                              gpus=len(s.gpu_indices or []) or (0 if s.role == "router" else 1), gpu_hourly_usd=s.gpu_hourly_usd, values=values,
                              client_ttft_p99_s=client, base_url=s.base_url,
                              findings=findings))
        cards.append(service_card(name, out))
    return cards
