"""Write the router's flag table (``python -m sglang_router.launch_router``) from an installed
sglang-router wheel: its argparse parser is plain Python (RouterArgs.add_cli_args), so this
imports it in that wheel's environment and reads the actions.

Usage: ``ROUTER_VENV/bin/python scripts/sglang_router/extract_flags.py > collectors/sglang/sglang-router-VERSION-flags.json``
Output: {"version", "prog", "flags": [{"names", "kind", "type", "choices"}]} in the form of the
diffusion table (kind: switch for store_true, list for nargs + / * or append, value otherwise).
"""

from __future__ import annotations

import argparse
import json
import sys


def main() -> int:
    from sglang_router.router_args import RouterArgs
    from sglang_router.version import __version__

    parser = argparse.ArgumentParser()
    RouterArgs.add_cli_args(parser, use_router_prefix=False, exclude_host_port=False)
    flags = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        kind = ("switch" if isinstance(action, argparse._StoreTrueAction) else
                "list" if action.nargs in ("+", "*") or isinstance(action, argparse._AppendAction) else "value")
        typ = getattr(action.type, "__name__", None) or ("bool" if kind == "switch" else "str")
        flags.append({"names": list(action.option_strings), "kind": kind, "type": typ,
                      "choices": list(action.choices) if action.choices else None})
    json.dump({"version": __version__, "prog": "sglang_router.launch_router", "flags": flags}, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
