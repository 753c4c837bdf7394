"""A trace of what a configured server served: its own request records over a window ending now
(`pitwall trace cut SERVER --since 1h`, the Traces page's Cut).

Where the records are, first found first:
1. the folder its launch writes request records into: the launch's own `export_metrics_to_file_dir`
   as the server reports it (a profile's `record_requests = true` puts it under the data folder's
   requests/<server>/; an operator's own flag may put it anywhere);
2. the data folder's requests/<server>/ when it holds files (a server recorded before, now
   running without);
3. its log (the server's log_path, or its latest launch's), which holds request lines when the
   server runs with --log-requests.
"""

from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy.engine import Engine

from collectors.trace import importer
from collectors.trace.model import ReadOptions, TraceError
from storage import repo

SOURCES = ("auto", "log", "metrics")


def sources(engine: Engine, server_name: str, source: str, requests_dir: Path) -> list[Path]:
    """The files or folder holding `server_name`'s request records (`source`: auto, log or metrics)."""
    server = repo.get_server(engine, name=server_name)
    if server is None or server.id is None:
        names = ", ".join(s.name for s in repo.list_servers(engine)) or "none"
        raise TraceError(f"No server named {server_name!r}; configured: {names}.")
    launch = repo.latest_launch(engine, server_id=server.id)
    args = (launch.server_args if launch else None) or {}
    folders = [Path(args["export_metrics_to_file_dir"])] if args.get("export_metrics_to_file") and \
        args.get("export_metrics_to_file_dir") else []
    folders.append(Path(requests_dir) / server.name)
    for folder in folders if source in ("auto", "metrics") else []:
        if folder.is_dir() and any(p.is_file() for p in folder.iterdir()):
            return [folder]
    if source == "metrics":
        raise TraceError(f"{server_name} has no request records: set record_requests = true in its profile and "
                         "relaunch it (its records go to the data folder's requests/), then cut again.")
    log = server.log_path or (launch.log_path if launch else None)
    if log and Path(log).is_file():
        return [Path(log)]
    raise TraceError(f"{server_name} has no request records Pitwall can read: set record_requests = true in its "
                     "profile and relaunch it, or give it a log_path and run it with --log-requests.")


def cut(engine: Engine, server_name: str, *, since_s: float, requests_dir: Path, name: str | None = None,
        source: str = "auto", tz: str | None = None, replace: bool = False) -> importer.Imported:
    """Build and store the trace of the last `since_s` seconds of `server_name`'s records."""
    if since_s <= 0:
        raise TraceError("The window must be longer than 0 s (e.g. 1h).")
    if source not in SOURCES:
        raise TraceError(f"Unknown source {source!r}; use one of {', '.join(SOURCES)}.")
    paths = sources(engine, server_name, source, requests_dir)
    built = importer.build(paths, name=name or f"{server_name}-{time.strftime('%Y%m%d-%H%M')}",
                           options=ReadOptions(tz=tz, max_requests=importer.DEFAULT_MAX_REQUESTS),
                           since_ts=time.time() - since_s)
    importer.store(engine, built, replace=replace)
    return built
