"""The sweep report as typed values: `SweepReport` and its `Level`s, read back from the stored dict.

collectors/probe/report.py (`level_report`) and collectors/probe/sweep.py build the report as these
values and store `to_dict()` (ProbeRun.report; its keys, units and meaning are the table in
report.py's docstring). Everything that reads a stored report goes through `SweepReport.from_dict` /
`Level.from_dict` here, so a reader names an attribute (`level.ttft_s.p99`, `level.throughput.rps`, `level.self_check.trusted`)
instead of spelling a key, and a missing key reads as the readers always defaulted it:

- counts (`requests`, `ok`) 0, `errors` {}; a latency block ({p50, p95, p99, mean, max}, seconds)
  all None; throughput figures (req/s, output tok/s, images/min) None;
- `self_check`, `image`, `spread` None when the level has none (an old run, another API);
- run-level workload blocks (`structured`, `turns`, `branches`, `branch_reuse`) and
  `consistency` None; they stay plain dicts, written and read by collectors/probe/structured.py,
  programs.py and consistency.py.

`to_dict()` gives back exactly the dict that was read: the keys it had, in its order, unknown keys
included, so a stored row, an export and `pitwall probe --json` keep their bytes. A value built in
code (no dict behind it) writes every field in the order below, leaving out the optional ones that
are None (`concurrency` / `rate`, `image`, `turns`, `branches`, `images_per_min`...); one built with
`keyed(...)` writes exactly the keys it was given, and those `put(...)` since, in that order.
"""

from __future__ import annotations

from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any, ClassVar, TypeVar

B = TypeVar("B", bound="Block")


def _block(cls: type[Block], *, many: bool = False) -> dict[str, Any]:
    return {"block": cls, "many": many}


@dataclass(slots=True)
class Block:
    """A report dict with typed fields: `extra` keeps the keys this class does not know,
    `shape` the keys the dict had, in order (None: built in code)."""

    extra: dict[str, Any] = field(default_factory=dict, kw_only=True, repr=False)
    shape: tuple[str, ...] | None = field(default=None, kw_only=True, repr=False, compare=False)

    #: fields left out of a built value's dict while None
    OPTIONAL: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def from_dict(cls: type[B], d: dict[str, Any]) -> B:
        known = {f.name: f for f in _own_fields(cls)}
        kw: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in d.items():
            f = known.get(key)
            sub = f.metadata.get("block") if f is not None else None
            if f is None:
                extra[key] = value
            elif sub is None:
                kw[key] = value
            elif f.metadata["many"] and isinstance(value, list) and all(isinstance(v, dict) for v in value):
                kw[key] = [sub.from_dict(v) for v in value]
            elif not f.metadata["many"] and isinstance(value, dict):
                kw[key] = sub.from_dict(value)
            elif value is None and _default(f) is None:
                kw[key] = None
            else:  # a shape no reader expects: kept as it was, the field keeps its default
                extra[key] = value
        return cls(**kw, extra=extra, shape=tuple(d))

    @classmethod
    def keyed(cls: type[B], **values: Any) -> B:
        """A value built in code that writes exactly these keys, in this order, a None included
        (a block whose keys depend on the API or the load mode)."""
        return cls(**values, shape=tuple(values))

    def put(self, **values: Any) -> None:
        """Set fields; a value with a shape writes each of them from now on (a new key after the
        keys it had, as a dict would)."""
        for name, value in values.items():
            setattr(self, name, value)
        if self.shape is not None:
            self.shape = (*self.shape, *(k for k in values if k not in self.shape))

    def has(self, name: str) -> bool:
        """Whether the dict had the key `name` (built in code: whether the field is set)."""
        return name in self.shape if self.shape is not None else getattr(self, name, None) is not None

    def to_dict(self) -> dict[str, Any]:
        own = _own_fields(type(self))
        if self.shape is None:
            keys = [f.name for f in own if not (f.name in self.OPTIONAL and getattr(self, f.name) is None)]
            keys += [k for k in self.extra if k not in keys]
        else:  # the dict that was read, then any field set since to other than its default
            keys = list(self.shape)
            keys += [f.name for f in own if f.name not in keys and getattr(self, f.name) != _default(f)]
        return {k: self.extra[k] if k in self.extra else _plain(getattr(self, k)) for k in keys}


def _own_fields(cls: type[Block]) -> list[Field[Any]]:
    return [f for f in fields(cls) if f.name not in ("extra", "shape")]


def _default(f: Field[Any]) -> Any:
    if f.default is not MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not MISSING else None


def _plain(value: Any) -> Any:
    if isinstance(value, Block):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@dataclass(slots=True)
class Stats(Block):
    """A latency block: percentiles, mean and max in seconds (bytes for peak memory); None
    when the level had no value (collectors/probe/stats.py `stats`)."""

    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    mean: float | None = None
    max: float | None = None


@dataclass(slots=True)
class Throughput(Block):
    """Over the level's steady window: successful requests/s, output tokens/s (None for
    images), images/min (images API only)."""

    OPTIONAL = frozenset({"images_per_min"})
    rps: float | None = None
    output_tok_s: float | None = None
    images_per_min: float | None = None


@dataclass(slots=True)
class SelfCheck(Block):
    """The client's verdict on itself for one level (report.py `self_check`): seconds, % of one
    core; `trusted` None when not checked."""

    loop_lag_p99_s: float | None = None
    lag_bound_s: float | None = None
    lag_basis: str | None = None
    client_cpu_pct: float | None = None
    cpu_max_pct: float | None = None
    trusted: bool | None = None
    reasons: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Achieved(Block):
    """What the client achieved: concurrency (Little's law) or rate (req/s) and the open
    loop's start lag p99 (s)."""

    OPTIONAL = frozenset({"concurrency", "rate", "start_lag_p99_s"})
    concurrency: float | None = None
    rate: float | None = None
    start_lag_p99_s: float | None = None


@dataclass(slots=True)
class ImageFigures(Block):
    """An images-API level's per-image figures (report.py `image_block`)."""

    per_image_s: Stats = field(default_factory=Stats, metadata=_block(Stats))
    inference_s: Stats = field(default_factory=Stats, metadata=_block(Stats))
    inference_s_per_step: Stats = field(default_factory=Stats, metadata=_block(Stats))
    peak_memory_bytes: Stats = field(default_factory=Stats, metadata=_block(Stats))
    steps: int | None = None
    images_per_request: int = 1
    reported: int = 0


@dataclass(slots=True)
class Spread(Block):
    """Each figure's [lo, hi] over the level's 3 repeats, in the figure's unit; None when not
    measured (collectors/probe/stats.py)."""

    rps: list[float] | None = None
    output_tok_s: list[float] | None = None
    images_per_min: list[float] | None = None
    ttft_p99_s: list[float] | None = None
    itl_p99_s: list[float] | None = None
    image_p99_s: list[float] | None = None
    e2e_p99_s: list[float] | None = None

    def of(self, key: str) -> list[float] | None:
        """The [lo, hi] of the figure named `key` (a field above), None when not measured."""
        value = getattr(self, key, None) if key in SPREAD_FIELDS else None
        return list(value) if isinstance(value, list) else None


SPREAD_FIELDS = ("rps", "output_tok_s", "images_per_min", "ttft_p99_s", "itl_p99_s", "image_p99_s", "e2e_p99_s")


@dataclass(slots=True)
class Level(Block):
    """One load level of a sweep (report.py `level_report`; the table there says each figure)."""

    OPTIONAL = frozenset({"concurrency", "rate", "image", "turns", "branches"})
    concurrency: int | float | None = None
    rate: float | None = None
    requests: int = 0
    ok: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    ttft_s: Stats = field(default_factory=Stats, metadata=_block(Stats))
    itl_s: Stats = field(default_factory=Stats, metadata=_block(Stats))
    tpot_s: Stats = field(default_factory=Stats, metadata=_block(Stats))
    e2e_s: Stats = field(default_factory=Stats, metadata=_block(Stats))
    throughput: Throughput = field(default_factory=Throughput, metadata=_block(Throughput))
    self_check: SelfCheck | None = field(default=None, metadata=_block(SelfCheck))
    success_rate: float | None = None
    achieved: Achieved = field(default_factory=Achieved, metadata=_block(Achieved))
    planned_requests: int | None = None
    warmup: int | None = None
    window_s: float | None = None
    steady_window_s: float | None = None
    stopped: str | None = None
    image: ImageFigures | None = field(default=None, metadata=_block(ImageFigures))
    spread: Spread | None = field(default=None, metadata=_block(Spread))
    turns: list[dict[str, Any]] | None = None
    branches: list[dict[str, Any]] | None = None

    @property
    def is_rate(self) -> bool:
        """An open-loop level (requests/s) rather than a closed loop (workers)."""
        return "concurrency" not in self.shape if self.shape is not None else self.concurrency is None

    @property
    def value(self) -> float | None:
        """The load level: its concurrency, or its request rate (req/s); None when unknown."""
        v = self.rate if self.is_rate else self.concurrency
        return float(v) if isinstance(v, int | float) else None

    @property
    def trusted(self) -> bool | None:
        """The level's self-check verdict; None when it has none."""
        return self.self_check.trusted if self.self_check is not None else None

    def p99(self, key: str) -> float | None:
        """The p99 (s) of `key`: "ttft_s", "itl_s", "tpot_s", "e2e_s", or "image" (per image)."""
        if key == "image":
            block = self.image.per_image_s if self.image is not None else None
        else:
            block = getattr(self, key, None) if key in ("ttft_s", "itl_s", "tpot_s", "e2e_s") else None
        v = block.p99 if isinstance(block, Stats) else None
        return float(v) if isinstance(v, int | float) else None

    @classmethod
    def of(cls, level: Level | dict[str, Any]) -> Level:
        """`level` as a Level (a stored dict is read)."""
        return level if isinstance(level, Level) else cls.from_dict(level)


@dataclass(slots=True)
class SweepReport(Block):
    """A whole sweep's report (ProbeRun.report, `run_sweep`'s return value)."""

    OPTIONAL = frozenset({"turns", "branches", "branch_reuse", "structured", "consistency"})
    run_id: int | None = None
    status: str | None = None
    levels: list[Level] = field(default_factory=list, metadata=_block(Level, many=True))
    fingerprint: str | None = None
    fingerprint_detail: dict[str, Any] | None = None
    n_prompts: int | None = None
    turns: list[dict[str, Any]] | None = None
    branches: list[dict[str, Any]] | None = None
    branch_reuse: dict[str, Any] | None = None
    structured: dict[str, Any] | None = None
    error: str | None = None
    trusted: bool | None = None
    consistency: dict[str, Any] | None = None

    @classmethod
    def of(cls, report: SweepReport | dict[str, Any] | None) -> SweepReport:
        """`report` as a SweepReport (a stored dict is read; None reads as an empty report)."""
        if isinstance(report, SweepReport):
            return report
        return cls.from_dict(report or {})
