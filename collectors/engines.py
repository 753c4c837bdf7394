"""The registry of inference engines: name -> Engine (collectors/base.py describes the fields).

Adding an engine is one folder (collectors/<engine>/ with `ENGINE = Engine(...)` in its
__init__.py) and one line in ENGINES. Server.engine in storage names the row used here.
"""

from __future__ import annotations

from typing import Any

from collectors import sglang, vllm
from collectors.base import CollectorError, Engine
from collectors.native_api import NativeApi

#: the engine of a server or profile that names none (storage's Server.engine default)
DEFAULT_ENGINE = "sglang"

ENGINES: dict[str, Engine] = {
    "sglang": sglang.ENGINE,
    "vllm": vllm.ENGINE,
}


def get_engine(name: str) -> Engine:
    """The Engine called `name`; CollectorError naming the known engines for any other name."""
    engine = ENGINES.get(name)
    if engine is None:
        known = ", ".join(sorted(ENGINES))
        raise CollectorError(f"Unknown engine {name!r}; Pitwall knows: {known}. Set the server's engine to one of them.")
    return engine


def display_name(name: str) -> str:
    """How pages and exports name the engine called `name` ("SGLang"); an unknown one by its name."""
    engine = ENGINES.get(name)
    return engine.display_name if engine is not None else name


def native_apis() -> dict[str, NativeApi]:
    """The registered engines' native generation APIs by name (the probe's `--api` values),
    in ENGINES order; the first engine to name one keeps it."""
    out: dict[str, NativeApi] = {}
    for engine in ENGINES.values():
        if engine.native_api is not None:
            out.setdefault(engine.native_api.name, engine.native_api)
    return out


def trace_formats() -> dict[str, Any]:
    """The registered engines' own request-record formats by name (`pitwall trace import
    --format`), in ENGINES order; each is built when first asked (its module is imported then)."""
    out: dict[str, Any] = {}
    for engine in ENGINES.values():
        if engine.trace_formats is not None:
            for name, fmt in engine.trace_formats().items():
                out.setdefault(name, fmt)
    return out
