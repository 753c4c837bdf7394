"""SGLang's own flag parser, asked in the server's Python (the Engine's `flag_parser`).

The launcher (launching/launcher.py) runs `python -c SCRIPT *args(entrypoint, model_path, flags)`
as a child of runner/procs.py with a deadline and hands the exit code and stderr to `verdict`.
The script builds the parser the way SGLang does (`ServerArgs.add_cli_args` on an argparse
parser, abbreviations off) and exits: 5 when the entrypoint module cannot be found in that
Python, 3 when `sglang` is not importable there, 4 when importing it fails, argparse's 2 with its
message on a bad flag, 0 when SGLang accepts the flags. A diffusion profile is not asked (the
script builds the LLM parser): the bundled diffusion table judges it (flags.py).
"""

from __future__ import annotations

from typing import Any

from collectors.base import FlagParser, Issue
from collectors.sglang import flags as sglang_flags
from collectors.sglang.launch import SECRET_FLAGS, flag_args

SCRIPT = """
import importlib.util, sys
try:
    found = importlib.util.find_spec(sys.argv[1]) is not None
except Exception:
    found = False
if not found:
    sys.exit(5)
if importlib.util.find_spec("sglang") is None:
    sys.exit(3)
try:
    import argparse
    from sglang.srt.server_args import ServerArgs
except Exception as exc:
    print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
    sys.exit(4)
parser = argparse.ArgumentParser(prog="sglang serve", allow_abbrev=False)
ServerArgs.add_cli_args(parser)
parser.parse_args(sys.argv[2:])
"""


def entry_module(entrypoint: str) -> str:
    """The module `python -m` runs for a profile's entrypoint."""
    return "sglang.cli.main" if entrypoint == "sglang serve" else entrypoint


def args(entrypoint: str, model_path: str, flags: dict[str, Any]) -> list[str]:
    """The script's arguments; a secret's value never reaches a command line, not even the
    parser's: its shape is enough, so it is replaced by "x"."""
    shown = {k: ("x" if k in SECRET_FLAGS and isinstance(v, str) else v) for k, v in flags.items()}
    return [entry_module(entrypoint), "--model-path", model_path, *flag_args(shown)]


def profile_kind(flags: dict[str, Any]) -> str:
    """'image' for a diffusion profile (`model-type = "diffusion"`), 'router' for the router's
    (its [flags] name workers), else 'llm'."""
    return "image" if sglang_flags.is_diffusion(flags) else "router" if sglang_flags.is_router(flags) else "llm"


def applies(flags: dict[str, Any]) -> bool:
    """Whether the script's parser judges these flags (not a diffusion or router profile's)."""
    return not sglang_flags.is_diffusion(flags) and not sglang_flags.is_router(flags)


def verdict(python: str, entrypoint: str, flags: dict[str, Any], returncode: int | None,
            stderr: str) -> tuple[list[Issue], str] | None:
    """The script's exit -> (issues, what checked the flags); None: sglang cannot be imported in
    `python`, so the bundled table judges alone."""
    if returncode == 5:
        module = entry_module(entrypoint)
        return [Issue("error", "entrypoint", f"{python} cannot find the module {module} (the profile's entrypoint); install it in that environment or point the server's python at one that has it.")], f"the bundled SGLang {sglang_flags.SGLANG_VERSION} flag table"
    if returncode in (3, 4):
        return None
    who = f"SGLang's parser in {python}"
    if returncode == 0:
        return [], who
    err = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    last = err[-1] if err else f"exit code {returncode}"
    msg = last.split("error: ", 1)[-1]
    hints = [sglang_flags.NOTES[f][1] for f in flags if f in sglang_flags.NOTES and f"--{f}" in msg]
    text = f"SGLang rejected the flags: {msg}." + (" " + " ".join(hints) if hints else "")
    return [Issue("error", None, text)], who


FLAG_PARSER = FlagParser(script=SCRIPT, args=args, applies=applies, verdict=verdict)
