"""Why a server shows no GPU figures (dashboard/services/gpu_entries.absent_text): a young server
is waiting for its GPU exporter, which is not an error; an old one has no telemetry."""

from __future__ import annotations

from collectors.gpu_dcgm import STARTUP_GRACE_S
from scorecard.gpu_entries import absent_text

NOW = 1_700_000_000.0


def test_a_server_started_moments_ago_is_waiting_for_its_exporter() -> None:
    text = absent_text(NOW - 40, NOW)
    assert text.startswith("Waiting for the GPU exporter: the server started 40 s ago")
    assert "No GPU telemetry" not in text


def test_past_twice_the_start_up_grace_there_is_no_telemetry() -> None:
    old = NOW - 2 * STARTUP_GRACE_S - 1
    assert absent_text(old, NOW).startswith("No GPU telemetry on this host")
    assert absent_text(None, NOW).startswith("No GPU telemetry on this host")  # no launch known
    assert absent_text(old, NOW, in_window=True).startswith("No GPU telemetry in this window")
