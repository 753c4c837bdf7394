"""What every `pitwall` subcommand shares: the exit codes, durations and the argument plumbing.

Exit status: EXIT_OK 0, EXIT_FAIL 1 (unknown server/run, unwritable path, a refused request),
EXIT_USAGE 2 (bad usage). `parse_duration` reads `--since`-style durations ('90s', '15m', '1h',
'2d', plain seconds) into seconds. `Parser` raises `Usage` instead of printing argparse's usage
block and exiting, so `parse_args` prints one line that points at the command's --help
(`pitwall export` and `pitwall export --fleet` use it).
"""

from __future__ import annotations

import argparse
import re
import sys

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """'90s', '15m', '1h', '2d' or plain seconds -> seconds; ValueError with the expected form."""
    m = _DURATION.match(text)
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"--since {text!r} is not a duration; use e.g. 90s, 15m, 1h or 2d")
    return float(m.group(1)) * _UNITS[m.group(2)]


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise Usage(message)


class Usage(Exception):
    pass


def parse_args(parser: argparse.ArgumentParser, argv: list[str], hint: str) -> argparse.Namespace | int:
    """The parsed arguments, or an exit code: 2 after one line on bad usage, 0 after --help."""
    try:
        return parser.parse_args(argv)
    except Usage as exc:
        print(f"pitwall export: {exc} (see {hint})", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
