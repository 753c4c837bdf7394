"""Pitwall's one exception root and its families, named by what went wrong.

The rule every Pitwall exception keeps: its message is one sentence a person can act on (what is
wrong and what to do), shown as that one line in the CLI and the UI, never as a traceback; any
secret it might quote (a database URL, a token) is masked by storage/redact.py before it is shown.
A class raised somewhere subclasses one family here (and keeps any builtin base it has, so
`except ValueError` still catches e.g. ProfileError). The top of each program (cli/main.py, the
UI's bootstrap) catches PitwallError once; code that can recover catches the family or the class.

`PitwallError.code` is the exit status of a `pitwall` command this error ends: 1 (EXIT_FAIL in
cli/common.py), 2 (EXIT_USAGE) for a setting or a command line of the wrong form.

This module imports nothing, so every package (storage is the bottom layer) may import it.
"""

from __future__ import annotations


class PitwallError(Exception):
    """Something Pitwall cannot do; the message says what is wrong and what to do."""

    code: int = 1


class ConfigError(PitwallError):
    """A setting, profile, alert rule or SLO target has the wrong form: fix the file or variable
    the message names (SettingsError, ProfileError, AlertRuleError, SloError)."""

    code = 2


class RequestError(PitwallError):
    """A request (a command line, a page's form, an intent) cannot be carried out as asked: an
    unknown name, a busy server, read-only mode, an incomplete form. Change the request."""


class LaunchRefused(PitwallError):
    """The runner refused to start a server (a bad flag, a port in use, a missing model); the
    launch is recorded as failed with the message."""


class HeldElsewhere(PitwallError):
    """Another runner holds what this one needs (a host's lease, a configured server's name):
    stop that runner or rename."""


class CollectorError(PitwallError):
    """A source (a server's HTTP API or log, NVML, dcgm-exporter, Prometheus) could not be read,
    or answered in a form Pitwall cannot use; the collector logs one event and the others carry on."""


class SchemaError(PitwallError, RuntimeError):
    """The database cannot be used by this Pitwall (not Pitwall's, or written by a newer one);
    the message says what to do. A command exits 2 (EXIT_USAGE) on it."""

    code = 2


class Interrupted(PitwallError):
    """Work stopped before its end because the runner is stopping; not a failure: the work is
    left for the next runner to resume."""
