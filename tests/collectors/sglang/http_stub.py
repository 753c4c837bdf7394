"""A tiny scripted aiohttp server on 127.0.0.1 for collector tests (real HTTP, no mocks).

`StubServer(handler)` runs aiohttp in a thread; `handler(path, headers)` returns
(status, body, content_type) or None for a 404; every request is recorded in `.requests`.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

from aiohttp import web

Handler = Callable[[str, dict[str, str]], "tuple[int, str, str] | None"]


class StubServer:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _handle(self, request: web.Request) -> web.Response:
        headers = dict(request.headers)
        self.requests.append((request.path, headers))
        answer = self.handler(request.path, headers)
        if answer is None:
            return web.Response(status=404, text="not found")
        status, body, ctype = answer
        return web.Response(status=status, text=body, content_type=ctype)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        server: Any = site._server
        self.port = int(server.sockets[0].getsockname()[1])
        self._runner = runner
        self._ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    def __enter__(self) -> StubServer:
        self._thread.start()
        if not self._ready.wait(timeout=10):
            raise RuntimeError("stub server did not start within 10 s")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


class MemoryState:
    """load_state/save_state backed by a dict, through JSON as the runner's CollectorState rows."""

    def __init__(self) -> None:
        self.data: dict[str, dict[str, Any]] = {}

    def load(self, key: str) -> dict[str, Any] | None:
        return self.data.get(key)

    def save(self, key: str, value: dict[str, Any]) -> None:
        self.data[key] = json.loads(json.dumps(value))
