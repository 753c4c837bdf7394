"""A second GPU source: NVIDIA dcgm-exporter's `/metrics`, for hosts where Pitwall cannot load
NVML (containers, Kubernetes nodes).

`DcgmBackend` is a `Backend` (collectors/gpu_nvml.py): each `read_raw()` scrapes the exporter
once and returns the same raw dicts NVML reads give, in NVML's units, so `raw_to_reading`, the GPU
collector and every `gpu.<i>.*` series are the same whichever source fed them.

The exporter's text format (dcgm-exporter `internal/pkg/rendermetrics/render_metrics.go`): one
series per field and GPU, `DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-…",pci_bus_id="…",
device="nvidia0",modelName="NVIDIA H200",Hostname="…"} 99`, field names and units from its
counters CSV (`etc/default-counters.csv`, `etc/dcp-metrics-included.csv`):

| DCGM field | unit | raw NVML field |
|---|---|---|
| DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_MEM_COPY_UTIL | % | utilization_pct.gpu / .memory |
| DCGM_FI_DEV_FB_USED, _FREE, _RESERVED, _TOTAL | MiB | memory_bytes (below) |
| DCGM_FI_DEV_POWER_USAGE | W | power_mw |
| DCGM_FI_DEV_POWER_MGMT_LIMIT (not in the default CSV) | W | power_limit_mw |
| DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION | mJ | energy_mj |
| DCGM_FI_DEV_GPU_TEMP | °C | temperature_c |
| DCGM_FI_DEV_SM_CLOCK, DCGM_FI_DEV_MEM_CLOCK | MHz | sm_clock_mhz, mem_clock_mhz |
| DCGM_FI_DEV_MAX_SM_CLOCK (not in the default CSV) | MHz | sm_clock_max_mhz |
| DCGM_FI_DEV_CLOCKS_EVENT_REASONS (DCGM_FI_DEV_CLOCK_THROTTLE_REASONS before DCGM 3.3) | bitmask | clock_event_reasons |
| DCGM_FI_DEV_XID_ERRORS | last XID | xid_events, when the value changes to a non-zero one |
| DCGM_FI_PROF_DRAM_ACTIVE | 0-1 | gpm dram_bw_util_pct |
| DCGM_FI_PROF_PIPE_TENSOR_ACTIVE (_HMMA_, _IMMA_, _DFMA_) | 0-1 | gpm tensor_any_pct (hmma, imma, dmma) |
| DCGM_FI_PROF_SM_ACTIVE, DCGM_FI_PROF_SM_OCCUPANCY, DCGM_FI_PROF_GR_ENGINE_ACTIVE | 0-1 | gpm sm_util_pct, sm_occupancy_pct, graphics_util_pct |
| DCGM_FI_PROF_PIPE_FP16_ACTIVE, _FP32_, _FP64_ | 0-1 | gpm fp16_pct, fp32_pct, fp64_pct |
| DCGM_FI_PROF_PCIE_TX_BYTES, _RX_; DCGM_FI_PROF_NVLINK_TX_BYTES, _RX_ | B/s | gpm pcie_*_mib_s, nvlink_*_mib_s |

A field the exporter does not export is an error on that field ("not exported by this
dcgm-exporter"), never 0. Memory: total is DCGM_FI_DEV_FB_TOTAL, else used + free + reserved;
with only DCGM_FI_DEV_FB_USED exported, used is read and total (so headroom) is missing, never 0.
The XID gauge holds the last XID since the exporter started: its first reading is the baseline
(its time is unknown), and each later change to a non-zero value is one `gpu_xid` event.
Cross-check: `curl -s http://HOST:9400/metrics | grep -E 'DCGM_FI_(DEV_GPU_UTIL|PROF_DRAM_ACTIVE)'`.

Bad values: the exporter writes some fields' values as text (`ERROR - FAILED TO CONVERT TO
STRING`, a string field such as DCGM_FI_DEV_CUDA_VISIBLE_DEVICES_STR: dcgm-exporter issues 394,
488), which the Prometheus format has no room for. The payload is parsed by
collectors/promtext.py, which sets such a line aside and keeps every other series; a
NaN or ±Inf value is set aside too (never a sample). Each field that turns bad is one
`collector_error` event naming the exporter, its host and the field (`problems()`), again only
after it read well and turned bad anew.

MIG (dcgm-exporter's default `-d f`): a card in MIG mode has no series of its own, only one per
GPU instance, labelled `GPU_I_PROFILE="3g.40gb",GPU_I_ID="1"` (after `modelName`), and every
instance repeats the card's own fields (power, energy, temperature, clocks, XID). Pitwall reads
such a card as one entry for the card (`gpu.<i>.*`: those card fields, read once) and one entry
per instance (`mig_id` = GPU_I_ID: `gpu.<i>.mig<GPU_I_ID>.*`: its memory, and utilisation from
the DCGM_FI_PROF_* fields, since DCGM reports no DCGM_FI_DEV_GPU_UTIL for an instance). A card
exported both whole and per instance (`-d g` with `-i`) keeps its whole-card series.

Several exporters (`gpu.dcgm_url` as a list: one per node, or one per simulator process) are one
`DcgmFleet`: GPUs merged by their `gpu` label, which must not clash across exporters; each
failing exporter (or clash) is one error, the others' readings stay.

Start-up: an exporter starts with (or after) Pitwall (the demo's look-alikes start with the demo
servers), so one that does not answer yet is waited for, not an error: for STARTUP_GRACE_S after
the fleet is made, an exporter that has never answered and refuses or times out is "waiting for
the exporter" (`waiting()`), no event and no failed poll. Past the grace it is one
`collector_error` event per episode, whose advice (`advice`) fits how Pitwall was started: the
demo's own exporters, `PITWALL_GPU_DCGM_URL`, or `gpu.dcgm_url` in the pitwall.toml read.
Golden payloads: tests/fixtures/dcgm-exporter-*.prom.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Any

from collectors.base import CollectorError
from collectors.http import MIB, get_capped
from collectors.promtext import parse_metrics

DEADLINE_S = 3.0
STARTUP_GRACE_S = 60.0  # an exporter not answering this long after start is an error, not a start-up race
ADVICE = "check that it runs and that gpu.dcgm_url in pitwall.toml points at its /metrics."
BODY_CAP = 16 * MIB  # 8 GPUs x ~80 fields is ~100 KiB; a k8s node with pod labels a few MiB

#: DCGM field -> (raw field, sub-key or None, factor to NVML's unit)
_DEV_FIELDS: dict[str, tuple[str, str | None, float]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("utilization_pct", "gpu", 1.0),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("utilization_pct", "memory", 1.0),
    "DCGM_FI_DEV_FB_USED": ("memory_bytes", "used", float(MIB)),
    "DCGM_FI_DEV_FB_FREE": ("memory_bytes", "free", float(MIB)),
    "DCGM_FI_DEV_FB_RESERVED": ("memory_bytes", "reserved", float(MIB)),
    "DCGM_FI_DEV_FB_TOTAL": ("memory_bytes", "total", float(MIB)),
    "DCGM_FI_DEV_POWER_USAGE": ("power_mw", None, 1000.0),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("power_limit_mw", None, 1000.0),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_mj", None, 1.0),
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_c", None, 1.0),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", None, 1.0),
    "DCGM_FI_DEV_MAX_SM_CLOCK": ("sm_clock_max_mhz", None, 1.0),
    "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_mhz", None, 1.0),
}
#: the clock-event reason bitmask (collectors/gpu_reasons.py), by its name since DCGM 3.3 first
_REASON_FIELDS = ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")
#: DCGM profiling field -> (GPM metric key of collectors/gpu_nvml.GPM_METRICS, factor)
_PROF_FIELDS: dict[str, tuple[str, float]] = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("graphics_util_pct", 100.0),
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_util_pct", 100.0),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("sm_occupancy_pct", 100.0),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_bw_util_pct", 100.0),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("tensor_any_pct", 100.0),
    "DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE": ("tensor_hmma_pct", 100.0),
    "DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE": ("tensor_imma_pct", 100.0),
    "DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE": ("tensor_dmma_pct", 100.0),
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": ("fp16_pct", 100.0),
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": ("fp32_pct", 100.0),
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE": ("fp64_pct", 100.0),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("pcie_tx_mib_s", 1.0 / MIB),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("pcie_rx_mib_s", 1.0 / MIB),
    "DCGM_FI_PROF_NVLINK_TX_BYTES": ("nvlink_tx_mib_s", 1.0 / MIB),
    "DCGM_FI_PROF_NVLINK_RX_BYTES": ("nvlink_rx_mib_s", 1.0 / MIB),
}
_XID = "DCGM_FI_DEV_XID_ERRORS"
_NOT_EXPORTED = "not exported by this dcgm-exporter (add {field} to its counters CSV)"
#: Fields of the whole card: a card in MIG mode repeats them on each instance's series
_CARD_FIELDS = frozenset({"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_POWER_MGMT_LIMIT", _XID,
                          "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_GPU_TEMP",
                          "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MAX_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK",
                          *_REASON_FIELDS})
_CARD_RAW = ("power_mw", "power_limit_mw", "energy_mj", "temperature_c", "sm_clock_mhz",
             "sm_clock_max_mhz", "mem_clock_mhz", "clock_event_reasons", "xid_events")
_LINE_NO = re.compile(r"line (\d+):")
_NAME = re.compile(r"\s*([A-Za-z_:][A-Za-z0-9_:]*)")
_ID_LABEL = re.compile(r'[{,]\s*(gpu|GPU_I_ID)="([^"]*)"')
_UNPARSED = "(lines not in the Prometheus format)"

Key = tuple[int, int | None]  # (card: the `gpu` label, MIG GPU instance: GPU_I_ID, or None)


@dataclass
class Exposition:
    """One exporter answer: the DCGM series of each GPU entry, and what was set aside."""

    gpus: dict[Key, dict[str, Any]] = field(default_factory=dict)  # {"labels", "values"}
    bad: dict[str, dict[str, Any]] = field(default_factory=dict)  # field -> {"where", "value"}
    errors: list[str] = field(default_factory=list)  # parser errors, in its words


def _where(labels: dict[str, str]) -> str:
    gi = labels.get("GPU_I_ID")
    return f"GPU {labels.get('gpu', '?')}" + (f" MIG {gi}" if gi else "")


def add_series(exp: Exposition, name: str, labels: dict[str, str], value: float,
               text: str | None = None) -> None:
    """One DCGM series into `exp` (other series are ignored); a non-number (`text`, as written)
    or a non-finite value is set aside under its field. Pure."""
    gpu, gi = labels.get("gpu", ""), labels.get("GPU_I_ID")
    if not name.startswith("DCGM_") or not gpu.isdigit() or (gi is not None and not gi.isdigit()):
        return
    if text is not None or not math.isfinite(value):
        bad = exp.bad.setdefault(name, {"where": [], "value": text if text is not None else str(value)})
        bad["where"].append(_where(labels))
        return
    entry = exp.gpus.setdefault((int(gpu), None if gi is None else int(gi)),
                                {"labels": dict(labels), "values": {}})
    entry["values"][name] = value


def parse_exposition(text: str) -> Exposition:
    """dcgm-exporter text -> its series per GPU entry; never raises (module doc: bad values). Pure."""
    parsed = parse_metrics(text)
    exp = Exposition(errors=parsed.errors)
    for s in parsed.samples:
        # prometheus_client names a counter's samples `<family>_total`; DCGM's fields do not
        # end in _total (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION is a counter)
        add_series(exp, s.family if s.name == s.family + "_total" else s.name, s.labels, s.value)
    lines = text.split("\n") if parsed.errors else []
    for err in parsed.errors:  # "line N: ..." (promtext.py): find the field on that line
        n = int(m.group(1)) if (m := _LINE_NO.match(err)) else 0
        cut = n == len(lines) and not text.endswith("\n")  # a payload cut mid-line: no field's fault
        line = lines[n - 1] if 0 < n <= len(lines) and not cut else ""
        name = _NAME.match(line)
        if line.lstrip().startswith("#") or name is None or not name.group(1).startswith("DCGM_"):
            exp.bad.setdefault(_UNPARSED, {"where": [], "value": err[:200]})
            continue
        value = line.rsplit("}", 1)[1] if "}" in line else line[name.end():]
        add_series(exp, name.group(1), dict(_ID_LABEL.findall(line)), math.nan,
                   value.strip()[:80] or "(no value)")
    return exp


def to_raw(values: dict[str, float], labels: dict[str, str]) -> dict[str, Any]:
    """One GPU's DCGM values -> the raw dict of collectors/gpu_nvml.py (NVML units). Pure."""
    fields: dict[str, Any] = {}
    errors: dict[str, str] = {}
    name = labels.get("modelName") or labels.get("model_name")
    uuid = labels.get("UUID") or labels.get("uuid")
    if name:
        fields["name"] = name
    if uuid:
        fields["uuid"] = uuid
    for dcgm, (raw, sub, factor) in _DEV_FIELDS.items():
        if dcgm not in values:
            if sub is None:
                errors.setdefault(raw, _NOT_EXPORTED.format(field=dcgm))
            continue
        value = values[dcgm] * factor
        if sub is None:
            fields[raw] = value
        else:
            fields.setdefault(raw, {})[sub] = value
    reasons = next((values[f] for f in _REASON_FIELDS if f in values), None)
    if reasons is None:
        errors["clock_event_reasons"] = _NOT_EXPORTED.format(field=_REASON_FIELDS[0])
    else:
        fields["clock_event_reasons"] = int(reasons)
    mem = fields.get("memory_bytes")
    if isinstance(mem, dict) and "used" in mem:
        if "total" not in mem and "free" in mem:
            mem["total"] = mem["used"] + mem["free"] + mem.get("reserved", 0.0)
        if "total" not in mem:  # used alone: total and headroom unknown, never 0
            errors["memory_bytes"] = ("memory used is read; total and headroom are "
                                      + _NOT_EXPORTED.format(field="DCGM_FI_DEV_FB_FREE"))
        mem["api"] = 2 if "reserved" in mem else 1
    else:
        errors["memory_bytes"] = _NOT_EXPORTED.format(field="DCGM_FI_DEV_FB_USED and _FREE")
        fields.pop("memory_bytes", None)
    if "utilization_pct" not in fields:
        errors["utilization_pct"] = _NOT_EXPORTED.format(field="DCGM_FI_DEV_GPU_UTIL")
    metrics = {key: round(values[f] * factor, 4) for f, (key, factor) in _PROF_FIELDS.items() if f in values}
    if metrics:
        fields["gpm"] = {"interval_s": None, "metrics": metrics, "failed": {}}
    else:
        errors["gpm"] = _NOT_EXPORTED.format(field="DCGM_FI_PROF_DRAM_ACTIVE and the other profiling fields")
    return {"fields": fields, "errors": errors}


def card_entries(gpus: dict[Key, dict[str, Any]]) -> list[tuple[Key, dict[str, float], dict[str, str]]]:
    """GPU entries -> (key, values, labels) in order: each card, then its MIG instances. A card
    with no series of its own (MIG mode) takes its card fields from its instances' series; an
    instance keeps only its own fields (module doc: MIG). Pure."""
    out: list[tuple[Key, dict[str, float], dict[str, str]]] = []
    for card in sorted({k[0] for k in gpus}):
        slices = sorted((k, e) for k, e in gpus.items() if k[0] == card and k[1] is not None)
        whole = gpus.get((card, None))
        if whole is not None:
            out.append(((card, None), whole["values"], whole["labels"]))
        else:
            values: dict[str, float] = {}
            for _, e in slices:
                for f in _CARD_FIELDS & e["values"].keys():
                    values.setdefault(f, e["values"][f])  # the lowest GPU_I_ID's
            labels = {k: v for k, v in slices[0][1]["labels"].items() if not k.startswith("GPU_I_")}
            out.append(((card, None), values, labels))
        for key, e in slices:
            out.append((key, {f: v for f, v in e["values"].items() if f not in _CARD_FIELDS}, e["labels"]))
    return out


def _describe_bad(url: str, host: str | None, fields: dict[str, dict[str, Any]]) -> str:
    shown = []
    for name, bad in list(fields.items())[:5]:
        where = sorted(set(bad["where"]))
        at = f" on {', '.join(where[:4])}{' …' if len(where) > 4 else ''}" if where else ""
        shown.append(f"{name}{at} ({bad['value']!r})")
    more = f" and {len(fields) - 5} more" if len(fields) > 5 else ""
    return (f"dcgm-exporter at {url}{f' (host {host})' if host else ''} sent series whose value "
            f"is not a number: {'; '.join(shown)}{more}. Those series are left out and every other "
            "one is read; remove non-numeric fields from the exporter's counters CSV (or make "
            "them labels), or upgrade the exporter.")


class DcgmBackend:
    """Reads one dcgm-exporter endpoint (e.g. http://127.0.0.1:9400/metrics) per `read_raw()`."""

    def __init__(self, url: str, *, deadline_s: float = DEADLINE_S, advice: str = ADVICE) -> None:
        self.url = url
        self.deadline_s = deadline_s
        self.advice = advice  # what to check when it does not answer: fits where the URL came from
        self.answered = False  # it has answered at least once (a start-up race is over)
        self.unreachable = False  # the last read found nothing listening (refused, timed out)
        self._last_xid: dict[int, float] = {}
        self._driver: str | None = None
        self._bad: set[str] = set()  # fields set aside in the last read
        self._problems: list[str] = []

    def read_raw(self) -> list[dict[str, Any]]:
        self.unreachable = False
        try:
            resp = get_capped(None, self.url, deadline_s=self.deadline_s, max_bytes=BODY_CAP)
        except CollectorError:
            raise
        except Exception as exc:
            self.unreachable = True
            raise CollectorError(
                f"dcgm-exporter at {self.url} did not answer ({type(exc).__name__}: {exc}); {self.advice}"
            ) from exc
        self.answered = True
        if resp.status_code != 200:
            raise CollectorError(f"dcgm-exporter at {self.url} answered HTTP {resp.status_code}; "
                                 "check gpu.dcgm_url in pitwall.toml.")
        exp = parse_exposition(resp.text)
        if not exp.gpus and exp.errors:
            raise CollectorError(f"dcgm-exporter at {self.url} sent text that is not the Prometheus "
                                 f"format ({exp.errors[0]}); is gpu.dcgm_url the exporter's /metrics?")
        return self._raws(exp)

    def _raws(self, exp: Exposition) -> list[dict[str, Any]]:
        """GPU entries -> the raw dicts of collectors/gpu_nvml.py (`index`, and `mig_id`,
        `mig_profile` for a MIG instance), the XID baseline kept per card, bad fields noted
        (shared by the exporter and Prometheus readers)."""
        out = []
        host = None
        for (index, mig), values, labels in card_entries(exp.gpus):
            raw = to_raw(values, labels)
            self._driver = labels.get("DCGM_FI_DRIVER_VERSION") or self._driver
            host = host or labels.get("Hostname") or labels.get("hostname")
            raw["index"] = index
            if mig is not None:
                raw.update(mig_id=mig, mig_profile=labels.get("GPU_I_PROFILE"))
                raw["errors"].update({f: f"a figure of the whole card: read as gpu.{index}.*" for f in _CARD_RAW})
                raw["errors"]["utilization_pct"] = ("not reported for a MIG instance by DCGM; its "
                                                    "DCGM_FI_PROF_GR_ENGINE_ACTIVE is (gpm.graphics_util_ratio)")
            elif (index, None) not in exp.gpus:
                raw["errors"].update({f: f"GPU {index} is in MIG mode: read per instance as "
                                      f"gpu.{index}.mig<GPU_I_ID>.*" for f in ("utilization_pct", "memory_bytes", "gpm")})
            xid = values.get(_XID)
            if mig is None and xid is None:
                raw["errors"]["xid_events"] = _NOT_EXPORTED.format(field=_XID)
            elif mig is None and xid is not None:
                before = self._last_xid.get(index)
                self._last_xid[index] = xid
                changed = before is not None and xid != before and xid > 0
                raw["fields"]["xid_events"] = [{"xid": int(xid)}] if changed else []
            out.append(raw)
        new_bad = {f: b for f, b in exp.bad.items() if f not in self._bad}
        self._bad = set(exp.bad)  # a field that reads well again ends its episode
        if new_bad:
            self._problems.append(_describe_bad(self.url, host, new_bad))
        return out

    def problems(self) -> list[str]:
        """One message per read where fields turned bad (module doc: bad values), handed out once."""
        out, self._problems = self._problems, []
        return out

    def meta(self) -> dict[str, Any]:
        return {"source": "dcgm-exporter", "url": self.url, "driver": self._driver}

    def close(self) -> None:
        pass


class DcgmFleet:
    """Several dcgm-exporters read as one host-wide GPU list (`gpu.dcgm_url` with several URLs:
    one per node, or one per simulator process).

    GPU indices come from each exporter's `gpu` label and must not clash: a GPU index already
    read from an earlier URL is left out of a later exporter's reading, with an error naming
    both URLs. An exporter that fails is one error of its own; the others' readings stay.
    `problems()` hands each new error to the collector once (again only after that exporter
    recovered and failed anew); when every exporter fails, `read_raw()` raises their errors.
    """

    def __init__(self, urls: list[str], *, deadline_s: float = DEADLINE_S, grace_s: float = STARTUP_GRACE_S,
                 advice: str = ADVICE, clock: Any = time.monotonic) -> None:
        self.members = [DcgmBackend(u, deadline_s=deadline_s, advice=advice) for u in urls]
        self._errors: dict[str, str] = {}
        self._reported: dict[str, str] = {}
        self._waiting: list[str] = []
        self._clock = clock
        self._grace_until = clock() + grace_s

    def waiting(self) -> list[str]:
        """URLs of the exporters not answering yet within the start-up grace (no error yet)."""
        return list(self._waiting)

    def read_raw(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        owner: dict[int, DcgmBackend] = {}
        errors: dict[str, str] = {}
        waiting: list[str] = []
        in_grace = self._clock() < self._grace_until
        for member in self.members:
            try:
                raws = member.read_raw()
            except CollectorError as exc:
                if in_grace and member.unreachable and not member.answered:
                    waiting.append(member.url)  # a start-up race: waiting for the exporter
                else:
                    errors[member.url] = str(exc)
                continue
            for raw in raws:
                index = raw["index"]
                if owner.setdefault(index, member) is not member:  # its MIG instances share it
                    errors[member.url] = (
                        f"dcgm-exporter at {member.url} reports GPU {index}, which {owner[index].url} "
                        "reports too; GPU indices (the exporters' gpu label) must be distinct "
                        "across the URLs in gpu.dcgm_url, so this GPU is left out: list each "
                        "host's exporter once and give simulated GPUs distinct indices (the "
                        "simulator's GPU index variable in each profile's [env], as profiles/demo.toml sets it).")
                    continue
                out.append(raw)
        self._errors, self._waiting = errors, waiting
        # Every exporter failing is handed out through problems() like one failing among many:
        # one event per episode, not one per retry.
        return sorted(out, key=lambda raw: (int(raw["index"]), raw.get("mig_id", -1)))

    def problems(self) -> list[str]:
        """Errors of the last read not handed out yet (one per failing exporter), then each
        exporter's own (fields that turned bad)."""
        new = [msg for url, msg in self._errors.items() if self._reported.get(url) != msg]
        self._reported = dict(self._errors)
        return new + [msg for member in self.members for msg in member.problems()]

    def meta(self) -> dict[str, Any]:
        driver = next((m.meta()["driver"] for m in self.members if m.meta()["driver"]), None)
        return {"source": "dcgm-exporter", "url": ", ".join(m.url for m in self.members),
                "driver": driver}

    def close(self) -> None:
        for member in self.members:
            member.close()


class DcgmPromBackend(DcgmBackend):
    """dcgm-exporter series read through a Prometheus that scrapes the exporter (`gpu.prometheus_selector`
    with `prometheus.url`): one range-vector query for the last `fresh_s` seconds of every
    `DCGM_FI_*` series the selector names, the newest sample of each. A series with no sample in
    that window is absent (an error on its field, as an unexported field is), never an old value
    carried forward. GPUs, units and XID events are those of the exporter read directly."""

    def __init__(self, prometheus_url: str, selector: str, *, deadline_s: float = DEADLINE_S,
                 fresh_s: float = 60.0) -> None:
        from collectors.prometheus_api import matchers

        super().__init__(prometheus_url, deadline_s=deadline_s)
        self.selector = matchers(selector)
        self.fresh_s = fresh_s

    def read_raw(self) -> list[dict[str, Any]]:
        from collectors.prometheus_api import PromClient

        client = PromClient(self.url, deadline_s=self.deadline_s, max_bytes=BODY_CAP)
        try:
            series = client.raw(f'__name__=~"DCGM_FI_.*",{self.selector}', time.time(), self.fresh_s)
        finally:
            client.close()
        exp = Exposition()
        exporters: dict[int, str] = {}  # GPU index -> the exporter (instance) it came from
        for one in series:
            labels = {k: v for k, v in one.labels.items() if k != "__name__"}
            name = one.labels.get("__name__", "")
            if not one.points or not labels.get("gpu", "").isdigit():
                continue
            index, instance = int(labels["gpu"]), labels.get("instance", "")
            if exporters.setdefault(index, instance) != instance:
                raise CollectorError(
                    f"gpu.prometheus_selector {{{self.selector}}} matches more than one dcgm-exporter "
                    f"in {self.url} (GPU {index} from {exporters[index]} and from {instance}): each "
                    "GPU would mix hosts. Narrow it to this host's exporter, e.g. "
                    f'instance="{exporters[index]}" or its Hostname label.')
            add_series(exp, name, labels, float(max(one.points)[1]))  # the newest sample
        if not exp.gpus:
            raise CollectorError(
                f"Prometheus {self.url} holds no DCGM_FI_* sample from the last {self.fresh_s:.0f} s "
                f"for {{{self.selector}}}; check gpu.prometheus_selector (the labels of this host's "
                "dcgm-exporter series, e.g. Hostname=\"node-1\" or instance=\"node-1:9400\") and that "
                "Prometheus scrapes the exporter.")
        return self._raws(exp)

    def meta(self) -> dict[str, Any]:
        return {"source": "dcgm-exporter via Prometheus", "url": f"{self.url} {{{self.selector}}}",
                "driver": self._driver}
