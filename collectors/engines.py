"""The registry of inference engines: name -> Engine (collectors/base.py describes the fields).

Adding an engine is one folder (collectors/<engine>/ with `ENGINE = Engine(...)` in its
__init__.py) and one line in ENGINES. Server.engine in storage names the row used here.
"""

from __future__ import annotations

from collectors import sglang
from collectors.base import CollectorError, Engine

#: the engine of a server or profile that names none (storage's Server.engine default)
DEFAULT_ENGINE = "sglang"

ENGINES: dict[str, Engine] = {
    "sglang": sglang.ENGINE,
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
