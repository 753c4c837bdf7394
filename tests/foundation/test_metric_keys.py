"""Meta-tests of the scorecard's named metric keys (scorecard/metric_specs.py):
- no view (dashboard/services/views/) spells a scorecard figure's key or a fleet row's key as a
  string: it imports the constants, so a renamed figure is renamed in one place;
- every named key constant names a figure of METRIC_SPECS (or a fleet row key of FLEET_ROW_FIGURES).
"""

from __future__ import annotations

import ast
from pathlib import Path

from test_series_keys import _strings  # every string constant that is not a docstring

from scorecard import metric_specs
from scorecard.metric_specs import FLEET_ROW_FIGURES, SPECS_BY_KEY

REPO = Path(__file__).resolve().parents[2]
VIEWS = REPO / "dashboard" / "services" / "views"
#: (module, text): a string that equals a figure key but is something else, with why
NOT_A_FIGURE = {
    ("benchmarks.py", "image_steps"): "the sweep spec's workload field (denoising steps asked for)",
}


def test_no_view_spells_a_metric_key():
    keys = set(SPECS_BY_KEY) | set(FLEET_ROW_FIGURES)
    found = []
    for path in sorted(VIEWS.glob("*.py")):
        for line, text, built in _strings(ast.parse(path.read_text(encoding="utf-8"))):
            if not built and text in keys and (path.name, text) not in NOT_A_FIGURE:
                found.append(f"{path.relative_to(REPO).as_posix()}:{line} spells {text!r}")
    assert not found, ("metric keys spelled in views (import scorecard/metric_specs.py's constants "
                       "instead):\n" + "\n".join(found))


def test_every_named_key_is_a_figure():
    named = {n: v for n, v in vars(metric_specs).items() if n.isupper() and isinstance(v, str)}
    assert "TTFT_P99_S" in named and "USD_PER_1M_OUTPUT_TOK" in named
    bad = {n: v for n, v in named.items() if v not in SPECS_BY_KEY and v not in FLEET_ROW_FIGURES}
    assert bad == {}
