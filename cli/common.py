"""What every `pitwall` subcommand shares: the exit codes, durations and the argument plumbing.

Exit status: EXIT_OK 0, EXIT_FAIL 1 (unknown server/run, unwritable path, a refused request),
EXIT_USAGE 2 (bad usage). `parse_duration` reads `--since`-style durations ('90s', '15m', '1h',
'2d', plain seconds) into seconds. `Parser` raises `Usage` instead of printing argparse's usage
block and exiting, so `parse_args` prints one line that points at the command's --help
(`pitwall export` and `pitwall export --fleet` use it). `open_db` is how every subcommand opens
the database: a locked, missing, unreadable or too new database is a `CliError` whose message is
one line a person can act on (the URL's secrets masked), which each command prints after its own
prefix ("pitwall export: ..."). `CliError.code` is the exit status, as every PitwallError's
(storage/errors.py): `main` prints any of them as one line and exits with its code.
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from storage.errors import PitwallError, RequestError

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from config.settings import Settings

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """'90s', '15m', '1h', '2d' or plain seconds -> seconds; ValueError with the expected form."""
    m = _DURATION.match(text)
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"--since {text!r} is not a duration; use e.g. 90s, 15m, 1h or 2d")
    return float(m.group(1)) * _UNITS[m.group(2)]


def parse_instant(text: str, *, flag: str = "--from") -> float:
    """An instant: epoch seconds ('1796458748.5') or ISO 8601 ('2026-12-05T08:21:15',
    '2026-12-05 08:21:15+01:00'; without an offset, UTC, as every time Pitwall prints) -> epoch
    seconds; ValueError with the expected form."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{flag} {text!r} is not a time; use epoch seconds or ISO 8601 such as "
                         "2026-12-05T08:21:15 (UTC unless it carries an offset)") from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise Usage(message)


class Usage(RequestError):
    """A command line of the wrong form; the message is argparse's, `parse_args` adds the hint."""

    code = 2


def parse_args(parser: argparse.ArgumentParser, argv: list[str], hint: str) -> argparse.Namespace | int:
    """The parsed arguments, or an exit code: 2 after one line on bad usage, 0 after --help."""
    try:
        return parser.parse_args(argv)
    except Usage as exc:
        print(f"{parser.prog.split(' --')[0]}: {exc} (see {hint})", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return int(exc.code or 0)


class CliError(PitwallError):
    """A failure to report as one line; `code` is the exit status (EXIT_FAIL unless given)."""

    def __init__(self, message: str, code: int = EXIT_FAIL) -> None:
        super().__init__(message)
        self.code = code


def open_db(settings: Settings, *, create: bool = True) -> Engine:
    """The database (storage/db.py make_engine); `create=False` for a read-only command, which
    creates nothing. Raises CliError: EXIT_USAGE when it is not a Pitwall database this version can
    use (SchemaError's message says what to do), EXIT_FAIL when it cannot be opened."""
    # sqlalchemy and storage are imported here, late: a `--help` stays quick
    from sqlalchemy.exc import DBAPIError

    from storage.db import SchemaError, make_engine
    from storage.redact import redact_text, redact_url

    try:
        return make_engine(settings.database_url, create=create)
    except SchemaError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    except DBAPIError as exc:
        msg = str(exc.orig) if exc.orig else str(exc)
        if "locked" in msg:
            raise CliError(
                "The database is locked by another process for too long; retry, or stop the "
                "process holding it.",
            ) from None
        raise CliError(f"Cannot open the database {redact_url(settings.database_url)}: "
                       f"{redact_text(msg)}.") from None
