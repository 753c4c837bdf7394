"""Process lifecycle shared by the LLM and diffusion servers: bind, access log, auth, signals, death.

Mirrors what uvicorn and SGLang print: ``Started server process [PID]``, ``Waiting for
application startup.``, ``Application startup complete.``, ``Uvicorn running on
http://HOST:PORT (Press CTRL+C to quit)``; on a busy port uvicorn's
``ERROR:    [Errno 98] error while attempting to bind on address ('HOST', PORT): address already
in use`` then exit 1; on SIGTERM/SIGINT ``Shutting down`` ... ``Finished server process [PID]``,
exit 0. A fatal scheduler error prints ``Scheduler hit an exception: <traceback>`` and
``Received sigquit from a child process. It usually means the child failed.`` and the process is
killed (SIGKILL, as SGLang's kill_process_tree does to itself).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable

from aiohttp import web

from simulator import logfmt
from simulator.llm_api import json_response

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
HttpHook = Callable[[str, str, int | None], None]


def client_of(request: web.Request) -> str:
    peer = request.transport.get_extra_info("peername") if request.transport else None
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return "127.0.0.1:0"


def log_access(log: logfmt.LogWriter, request: web.Request, status: int) -> None:
    if request.get("sim_logged"):
        return
    request["sim_logged"] = True
    log.access(client_of(request), request.method, request.path_qs, status)


def make_middleware(log: logfmt.LogWriter, api_key: str | None,
                    http_hook: HttpHook | None = None) -> Callable[..., Awaitable[web.StreamResponse]]:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        path = request.path
        if http_hook:
            http_hook(path, request.method, None)
        status = 500
        try:
            if (api_key and request.method != "OPTIONS" and not path.startswith("/health")
                    and not path.startswith("/metrics")
                    and request.headers.get("Authorization") != f"Bearer {api_key}"):
                status = 401
                resp: web.StreamResponse = json_response({"error": "Unauthorized"},
                                                             status=401)
            else:
                try:
                    resp = await handler(request)
                except web.HTTPException as exc:
                    resp = json_response({"detail": exc.reason}, status=exc.status)
            status = resp.status
            log_access(log, request, status)
            return resp
        finally:
            if http_hook:
                http_hook(path, request.method, status)
    return middleware


async def bind(app: web.Application, host: str, port: int, log: logfmt.LogWriter
               ) -> web.AppRunner | None:
    """Start serving; None (after uvicorn's error lines) when the address cannot be bound."""
    log.uvicorn(f"Started server process [{os.getpid()}]")
    log.uvicorn("Waiting for application startup.")
    log.uvicorn("Application startup complete.")
    # Open streams get 5 s to finish after SIGTERM; a hung request does not block the stop.
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=5.0)
    await runner.setup()
    # uvicorn sets SO_REUSEADDR: a relaunch can bind while old connections sit in TIME_WAIT,
    # and a port held by a listening process still fails with Errno 98.
    site = web.TCPSite(runner, host, port, reuse_address=True)
    try:
        await site.start()
    except OSError as exc:
        log.uvicorn(str(exc), level="error")
        log.uvicorn("Waiting for application shutdown.")
        log.uvicorn("Application shutdown complete.")
        await runner.cleanup()
        return None
    log.uvicorn(f"Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)")
    return runner


def install_signal_stop() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def shutdown(runner: web.AppRunner, log: logfmt.LogWriter) -> None:
    log.uvicorn("Shutting down")
    log.uvicorn("Waiting for application shutdown.")
    await runner.cleanup()
    log.uvicorn("Application shutdown complete.")
    log.uvicorn(f"Finished server process [{os.getpid()}]")


def die(log: logfmt.LogWriter) -> None:
    """What SGLang's main process does when a child reports failure: kill the whole tree."""
    log.log("Received sigquit from a child process. It usually means the child failed.",
            level="error")
    os.kill(os.getpid(), signal.SIGKILL)
