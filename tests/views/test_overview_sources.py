"""The Overview's key figures name their source (one truth per figure): a figure the
scorecard took from a sweep says "sweep", one from the canary says "canary", never one for the
other. Real SQLite, the scorecard suite's recorded seeds."""

from __future__ import annotations

from scorecard_seed import T0, seed_alpha, seed_canary_only

from dashboard.services.views.overview import server_cards, source_label


def _card(engine, name: str, now: float):
    return next(c for c in server_cards(engine, now=now) if c.name == name)


def test_sweep_figures_say_sweep_and_canary_figures_say_canary(engine) -> None:
    seed_alpha(engine)
    seed_canary_only(engine)
    alpha = _card(engine, "alpha", T0 + 6)
    assert alpha.key["ttft_p99_s"] is not None
    assert source_label(alpha, "ttft_p99_s") == "sweep" and source_label(alpha, "success_rate") == "sweep"
    beta = _card(engine, "beta", T0 + 4)
    assert beta.key["ttft_p99_s"] is not None
    assert source_label(beta, "ttft_p99_s") == "canary" and source_label(beta, "success_rate") == "canary"
