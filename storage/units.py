"""The one table of units: what each unit key means and how a value in it is shown, in a table
cell and on a chart. Scorecards (METRIC_SPECS' `display`), `fmt_value` (present/format.py),
the live and benchmark charts (dashboard/components/timeseries_charts.py) and the export charts all
read UNITS; none keeps a table of its own (tests/foundation/test_units.py holds them to that).

Values are stored and exported in base units (`ttft_s` in seconds, `kv_usage` a 0-1 ratio,
`mem_used_bytes` in bytes); a unit's display fields convert them for a person only:
- `label`: what a unit column or the README's metric table reads ("ms / s": a table shows
  milliseconds under one second and seconds above).
- `mult`, `axis`, `d3`: a chart's axis (and tooltip), or a number column, shows value × `mult`,
  titled `axis`, with the d3 format `d3`. An axis has one scale, so seconds are drawn in ms and
  bytes in GiB.
- `text`: how `fmt_value` writes one number: the first `Step` whose `below` the value's magnitude
  is under (or whose `below` is None) formats value × mult / div with its `str.format` pattern.
- `words`: a category, not a quantity: the value is an index into these words.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One range of `fmt_value`: used when abs(value) < `below` (None: any value left)."""

    below: float | None
    pattern: str  # str.format pattern of the one converted number, e.g. "{:.1f} ms"
    mult: float = 1.0
    div: float = 1.0  # a divisor, not mult=1/div: value / 1e12 and value * 1e-12 can round apart

    def format(self, value: float) -> str:
        return self.pattern.format(value * self.mult / self.div)


@dataclass(frozen=True)
class Unit:
    meaning: str
    label: str
    text: tuple[Step, ...]
    mult: float = 1.0
    axis: str = ""  # "" leaves the axis untitled (the chart's title says what is counted)
    d3: str = ",.3g"
    words: tuple[str, ...] = ()


#: fmt_value's pattern and a chart's d3 format for a unit not in UNITS
FALLBACK_PATTERN = "{:,.3g}"
FALLBACK_D3 = ",.3g"

_GIB = 2.0**30

#: unit key -> what it means and how it reads. The gpu_bound_by verdict's words follow
#: scorecard/gpu_wall.py VERDICTS (a test holds the two in step).
UNITS: dict[str, Unit] = {
    "s": Unit("seconds (latency); a table shows ms under 1 s", "ms / s",
              (Step(1.0, "{:.1f} ms", mult=1000.0), Step(None, "{:.2f} s")),
              mult=1000.0, axis="ms", d3=",.1~f"),
    "sec": Unit("seconds shown as seconds (an image takes seconds, not milliseconds)", "s",
                (Step(None, "{:,.3f} s"),), axis="s", d3=",.3~f"),
    "s_step": Unit("seconds per denoising step", "s/step", (Step(None, "{:,.3f} s/step"),),
                   axis="s/step", d3=",.3~f"),
    "ratio": Unit("a 0-1 fraction, shown as a percentage", "%", (Step(None, "{:.1f} %", mult=100.0),),
                  mult=100.0, axis="%", d3=".1f"),
    "pct": Unit("a percentage already (0-100)", "%", (Step(None, "{:.1f} %"),), axis="%", d3=".1f"),
    "count": Unit("a number of things (requests, tokens, steps, events)", "count",
                  (Step(None, "{:,.0f}"),), d3=",.2~f"),
    "tok_step": Unit("tokens a decode step (speculative accept length: accepted drafts + the bonus token)",
                     "tok/step", (Step(None, "{:,.2f} tok/step"),), axis="tok/step", d3=",.2f"),
    "tok_s": Unit("tokens per second", "tok/s", (Step(None, "{:,.1f} tok/s"),), axis="tok/s", d3=",.0f"),
    "rps": Unit("requests per second", "req/s", (Step(None, "{:,.2f} req/s"),), axis="req/s", d3=",.2f"),
    "img_min": Unit("images per minute", "images/min", (Step(None, "{:,.1f} images/min"),),
                    axis="images/min", d3=",.1f"),
    "usd": Unit("US dollars; cents and below with four decimals", "USD",
                (Step(1.0, "${:,.4f}"), Step(None, "${:,.2f}")), axis="USD", d3="$,.4~f"),
    "usd_h": Unit("US dollars per hour (a GPU's price)", "USD/h", (Step(None, "${:,.2f}/h"),),
                  axis="USD/h", d3="$,.2f"),
    "usd_per_mtok": Unit("US dollars per million tokens", "USD/1M tok", (Step(None, "${:,.3f} / 1M tok"),),
                         axis="USD/1M tok", d3="$,.3f"),
    "j": Unit("joules; a fraction of a joule (energy per token) with three digits", "J",
              (Step(100.0, "{:.3g} J"), Step(None, "{:,.0f} J")), axis="J", d3=",.3~g"),
    "w": Unit("watts", "W", (Step(None, "{:,.0f} W"),), axis="W", d3=",.0f"),
    "c": Unit("degrees Celsius", "°C", (Step(None, "{:.0f} °C"),), axis="°C", d3=".0f"),
    "x": Unit("a multiplier (2.30× the baseline)", "×", (Step(None, "{:,.2f}×"),), axis="×", d3=",.2f"),
    "bytes": Unit("bytes; a table picks the binary prefix, a chart shows GiB", "GiB",
                  (Step(1024.0, "{:.0f} B"), Step(1024.0**2, "{:.1f} KiB", div=1024.0),
                   Step(1024.0**3, "{:.1f} MiB", div=1024.0**2), Step(1024.0**4, "{:.1f} GiB", div=_GIB),
                   Step(None, "{:.1f} TiB", div=1024.0**4)),
                  mult=1.0 / _GIB, axis="GiB", d3=",.1f"),
    # decimal, as memory bandwidth is quoted (4.8 TB/s on an H200)
    "bytes_s": Unit("bytes per second (memory bandwidth); GB/s under 0.1 TB/s", "TB/s",
                    (Step(1e11, "{:,.1f} GB/s", div=1e9), Step(None, "{:.2f} TB/s", div=1e12)),
                    mult=1e-12, axis="TB/s", d3=",.2f"),
    "verdict": Unit("which wall a GPU ran against: an index into `words`", "verdict",
                    (Step(None, "{:g}"),),
                    words=("memory bandwidth", "compute", "neither wall", "idle", "mixed", "power")),
}

#: other spellings of a unit key that readers accept
ALIASES: dict[str, str] = {"req_s": "rps"}


def unit(key: str) -> Unit | None:
    """The unit `key` (or its alias) names; None for a key not in the table."""
    return UNITS.get(ALIASES.get(key, key))


def axis(key: str) -> tuple[float, str, str]:
    """(multiplier, axis title, d3 format) of a chart of values in `key`; an unknown key is drawn
    as is, untitled, with three significant digits."""
    u = unit(key)
    return (1.0, "", FALLBACK_D3) if u is None else (u.mult, u.axis, u.d3)


def is_category(key: str) -> bool:
    """Whether values in `key` name a category (an index into words): same or not, never a delta."""
    u = unit(key)
    return u is not None and bool(u.words)


def label(key: str) -> str:
    """What a unit column reads for `key`; the key itself when it is not in the table."""
    u = unit(key)
    return key if u is None else u.label


def format_number(value: float, key: str) -> str:
    """One present (not None, not NaN) base-unit value as a table shows it."""
    u = unit(key)
    if u is None:
        return FALLBACK_PATTERN.format(value)
    if u.words:
        i = int(value)
        if 0 <= i < len(u.words):
            return u.words[i]
    for step in u.text:
        if step.below is None or abs(value) < step.below:
            return step.format(value)
    return FALLBACK_PATTERN.format(value)
