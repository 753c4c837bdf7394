"""The argument plumbing `pitwall export` and `pitwall export --fleet` share (cli.py, fleet_cli.py).

Exit status: EXIT_OK 0, EXIT_FAIL 1 (unknown server/run, unwritable path), EXIT_USAGE 2 (bad
usage). `Parser` raises `Usage` instead of printing argparse's usage block and exiting, so
`parse_args` prints one line that points at the command's --help.
"""

from __future__ import annotations

import argparse
import sys

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


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
