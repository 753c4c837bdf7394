"""What a page, an export or the CLI may show: redacted copies of stored rows and frames.

Services hand pages these copies, so pages stay thin and never see a secret: a Launch's argv
(`--api-key X`), env (`HF_TOKEN`) and server args, a Server's API key and a URL's password, an
Intent's message and log excerpt, an Event's message and raw excerpt. The rules are
storage/redact.py's; storage keeps Launch.argv/env exact for rollback, and rows written before
write-time redaction existed are masked here too. Copies only: the stored rows are untouched.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import pandas as pd

from storage.models import Intent, Launch, ProbeRun, Server
from storage.redact import (
    MASK,
    masked_value,
    redact_argv,
    redact_obj,
    redact_text,
    redact_url,
    secret_name,
)

T = TypeVar("T", Launch, Server, Intent, ProbeRun)
EVENT_TEXT = ("message", "raw")


def _copy(row: T, update: dict[str, Any]) -> T:
    copied: T = row.model_copy(update=update)
    return copied


def launch(row: Launch | None) -> Launch | None:
    """A Launch as it may be shown: argv, env, server args and end reason redacted."""
    if row is None:
        return None
    return _copy(row, {
        "argv": redact_argv(list(row.argv)) if row.argv is not None else None,
        "env": redact_obj(dict(row.env)) if row.env is not None else None,
        "server_args": redact_obj(dict(row.server_args)) if row.server_args is not None else None,
        "end_reason": redact_text(row.end_reason) if row.end_reason else row.end_reason,
    })


def server(row: Server) -> Server:
    """A Server as it may be shown: its API key masked, its base URL without a password."""
    return _copy(row, {"api_key": MASK if row.api_key else row.api_key,
                       "base_url": redact_url(row.base_url)})


def intent(row: Intent | None) -> Intent | None:
    """An Intent as it may be shown: message, result (log excerpts) and progress redacted."""
    if row is None:
        return None
    return _copy(row, {
        "message": redact_text(row.message) if row.message else row.message,
        "result": redact_obj(row.result) if row.result is not None else None,
        "progress": redact_obj(row.progress) if row.progress is not None else None,
    })


def probe_run(row: ProbeRun | None) -> ProbeRun | None:
    """A ProbeRun as it may be shown: its error text and the URL in its spec redacted."""
    if row is None:
        return None
    return _copy(row, {"error": redact_text(row.error) if row.error else row.error,
                       "url": redact_url(row.url) if row.url else row.url,
                       "spec": redact_obj(row.spec) if row.spec is not None else None})


def diff_rows(rows: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """(setting, value, value, ...) rows of a profile or config diff as shown: a secret setting
    (`flags.api-key`, `env.HF_TOKEN`) has its values masked, every other value is redacted."""
    out: list[tuple[Any, ...]] = []
    for key, *values in rows:
        secret = isinstance(key, str) and secret_name(key)
        out.append((key, *[masked_value(v) if secret else redact_obj(v) for v in values]))
    return out


def setting_text(v: Any) -> str:
    """A profile setting's value as a diff shows it: missing as an em dash, booleans as TOML spells them."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v).lower()
    return str(v)


def diff_frame(rows: list[tuple[str, Any, Any]], a: str, b: str) -> pd.DataFrame:
    """A two-profile diff (setting, value in a, value in b) as a table, secrets masked (diff_rows);
    `a` and `b` name the value columns ("running (demo)", "winner (fast)")."""
    return pd.DataFrame(
        [{"setting": k, a: setting_text(va), b: setting_text(vb)} for k, va, vb in diff_rows(rows)],
        columns=["setting", a, b],
    )

def frame(df: pd.DataFrame, columns: tuple[str, ...] = EVENT_TEXT) -> pd.DataFrame:
    """A copy of `df` with the named text columns redacted (missing columns are skipped)."""
    present = [c for c in columns if c in df.columns]
    if df.empty or not present:
        return df
    out = df.copy()
    for c in present:
        out[c] = out[c].map(lambda v: redact_text(v) if isinstance(v, str) else v)
    return out
