"""What every page session reads through components/session.py: the database engine, the server
names of the sidebar's picker and the runner's one-line status (no Streamlit; the component
caches these with st.cache_resource / st.cache_data).

`open_engine(url)` is storage.db.make_engine: it creates or upgrades the schema and raises
SchemaError (re-exported here) for a database this Pitwall cannot use; PitwallError and
RequestError (storage/errors.py) are re-exported too, for components, which import no storage. The runner counts as
alive while its host lease's heartbeat is fresh (health.runner_alive, health.list_runners: a fleet
has one per host); cross-check with `pitwall status`.
"""

from __future__ import annotations

from sqlalchemy.engine import Engine

from dashboard.services.views import health
from storage import repo
from storage.db import SchemaError, make_engine
from storage.errors import PitwallError, RequestError

__all__ = ["PitwallError", "RequestError", "SchemaError", "open_engine", "runner_status_line",
           "server_names"]


def open_engine(url: str) -> Engine:
    """The engine of a database URL (schema created or upgraded); SchemaError when unusable."""
    return make_engine(url)


def server_names(engine: Engine) -> list[str]:
    """Names of the servers in storage, in the order the picker lists them."""
    return [s.name for s in repo.list_servers(engine)]


def runner_status_line(engine: Engine) -> tuple[bool, str]:
    """(alive, one-line summary) of the fleet's runners, for the sidebar: alive while at least
    one heartbeats; a stopped one among live ones is named."""
    runners = health.list_runners(engine)
    live = [r for r in runners if r.alive]
    if not runners:
        return False, "Runner not running — start Pitwall with `pitwall up`."
    if not live:
        return False, "Runner stopped — no heartbeat; restart it with `pitwall up`."
    if len(runners) == 1:
        return True, "Runner collecting."
    dead = [r.host for r in runners if not r.alive]
    line = f"{len(live)} runners collecting"
    return True, line + (f"; stopped: {', '.join(dead)}." if dead else ".")
