"""The diffusion server's launch flags: SGLang 0.5.23 ``sglang serve`` on a diffusers model.

The flag table (sglang_0_5_23_diffusion_flags.json, written from the 0.5.23 wheel by
scripts/sglang_diffusion/extract_flags.py) lists every flag ``add_multimodal_gen_serve_args``
registers: 172 of them, e.g. ``--num-gpus``, ``--tp-size``, ``--sp-degree``, ``--ulysses-degree``,
``--ring-degree``, ``--enable-cfg-parallel``, ``--enable-torch-compile``, ``--cache-dit-config``,
``--batching-max-size``, ``--enable-metrics``, ``--output-path``, ``--log-level``. Kinds as in
SGLang: a StoreBoolean flag is bare or takes true/false (``--enable-metrics``,
``--enable-metrics true``); ``store_true`` ones are bare; ``nargs='+'`` ones take a list.

Errors as SGLang 0.5.23 reports them (sglang/cli/serve.py and ServerArgs.from_cli_args): the
parser is ``argparse.ArgumentParser`` run with ``parse_known_args``, so a bad value is argparse's
usage + ``sglang: error: argument --num-gpus: invalid int value: 'x'``, exit 2; an unknown flag
is left over and then ``error: unrecognized arguments: --enable-radix-cache`` on stderr, exit 1
(a ``SystemExit`` with a message, no usage line). ``--model-type diffusion`` is the selector
``sglang serve`` removes before parsing. Cache-DiT is switched on by SGLANG_CACHE_DIT_ENABLED=true
(env, as in SGLang); TeaCache per request (``enable_teacache``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from simulator.args import add_sim_args, check_sim_args

FLAGS_FILE = Path(__file__).with_name("sglang_0_5_23_diffusion_flags.json")
TYPES: dict[str, Any] = {"int": int, "float": float, "str": str}


@lru_cache(maxsize=1)
def flag_table() -> list[dict[str, Any]]:
    data: dict[str, Any] = json.loads(FLAGS_FILE.read_text())
    return list(data["flags"])


def _store_boolean(text: str) -> bool:
    low = text.lower()
    if low not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"Invalid boolean value: {text}. Expected 'true' or 'false'.")
    return low == "true"


def build_diffusion_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sglang", description="SGLang Diffusion Model Serving")
    for f in flag_table():
        names, kind = f["names"], f["kind"]
        if kind == "switch":
            p.add_argument(*names, action="store_true")
        elif kind == "optional":
            p.add_argument(*names, nargs="?", const=True, default=None, type=_store_boolean)
        elif kind == "list":
            p.add_argument(*names, nargs="+", type=TYPES.get(f["type"], str),
                           choices=f["choices"])
        else:
            p.add_argument(*names, type=TYPES.get(f["type"], str), choices=f["choices"])
    add_sim_args(p)
    return p


def split_model_type(argv: list[str]) -> tuple[str, list[str]]:
    """(``--model-type`` value or "auto", argv without it), as sglang/cli/serve.py does."""
    kind, rest, i = "auto", [], 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--model-type" and i + 1 < len(argv):
            kind, i = argv[i + 1], i + 2
            continue
        if arg.startswith("--model-type="):
            kind = arg.split("=", 1)[1]
        else:
            rest.append(arg)
        i += 1
    return kind, rest


def parse_diffusion_args(argv: list[str]) -> argparse.Namespace:
    """Namespace of a diffusion launch, with SGLang's defaults for what it resolves itself."""
    parser = build_diffusion_parser()
    ns, unknown = parser.parse_known_args(argv)
    if unknown:
        raise SystemExit(f"error: unrecognized arguments: {' '.join(unknown)}")
    if not ns.model_path:
        raise SystemExit("error: --model-path is required")
    check_sim_args(parser, ns)
    ns.sim_kind = "image"
    defaults = {"num_gpus": 1, "tp_size": 1, "host": "127.0.0.1", "port": 30000,
                "scheduler_port": 5555, "output_path": "outputs/", "log_level": "info",
                "batching_max_size": 1, "batching_delay_ms": 0.0, "data_parallel_size": 1}
    for key, value in defaults.items():
        if getattr(ns, key, None) is None:
            setattr(ns, key, value)
    for key in ("enable_metrics", "enable_torch_compile", "enable_cfg_parallel"):
        setattr(ns, key, bool(getattr(ns, key)))
    return ns


def is_diffusion_launch(argv: list[str]) -> bool:
    """``--model-type diffusion``, or the ``--sim-kind image`` / SGLANG_SIM_KIND=image knob."""
    kind, rest = split_model_type(argv)
    if kind == "diffusion":
        return True
    if kind != "auto":
        return False
    for i, arg in enumerate(rest):
        if arg == "--sim-kind=image" or (arg == "--sim-kind" and rest[i + 1:i + 2] == ["image"]):
            return True
    return os.environ.get("SGLANG_SIM_KIND") == "image" and "--sim-kind" not in " ".join(rest)


if __name__ == "__main__":  # pragma: no cover - a manual look at the parser
    build_diffusion_parser().print_help(sys.stdout)
