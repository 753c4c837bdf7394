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
| DCGM_FI_DEV_FB_USED, _FREE, _RESERVED | MiB | memory_bytes (total = used + free + reserved) |
| DCGM_FI_DEV_POWER_USAGE | W | power_mw |
| DCGM_FI_DEV_POWER_MGMT_LIMIT (not in the default CSV) | W | power_limit_mw |
| DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION | mJ | energy_mj |
| DCGM_FI_DEV_GPU_TEMP | °C | temperature_c |
| DCGM_FI_DEV_SM_CLOCK, DCGM_FI_DEV_MEM_CLOCK | MHz | sm_clock_mhz, mem_clock_mhz |
| DCGM_FI_DEV_XID_ERRORS | last XID | xid_events, when the value changes to a non-zero one |
| DCGM_FI_PROF_DRAM_ACTIVE | 0-1 | gpm dram_bw_util_pct |
| DCGM_FI_PROF_PIPE_TENSOR_ACTIVE (_HMMA_, _IMMA_, _DFMA_) | 0-1 | gpm tensor_any_pct (hmma, imma, dmma) |
| DCGM_FI_PROF_SM_ACTIVE, DCGM_FI_PROF_SM_OCCUPANCY, DCGM_FI_PROF_GR_ENGINE_ACTIVE | 0-1 | gpm sm_util_pct, sm_occupancy_pct, graphics_util_pct |
| DCGM_FI_PROF_PIPE_FP16_ACTIVE, _FP32_, _FP64_ | 0-1 | gpm fp16_pct, fp32_pct, fp64_pct |
| DCGM_FI_PROF_PCIE_TX_BYTES, _RX_; DCGM_FI_PROF_NVLINK_TX_BYTES, _RX_ | B/s | gpm pcie_*_mib_s, nvlink_*_mib_s |

A field the exporter does not export is an error on that field ("not exported by this
dcgm-exporter"), never 0. MIG instance series (`GPU_I_ID` label) are left out: Pitwall attributes
whole GPUs. The XID gauge holds the last XID since the exporter started: its first reading is the
baseline (its time is unknown), and each later change to a non-zero value is one `gpu_xid` event.
Cross-check: `curl -s http://HOST:9400/metrics | grep -E 'DCGM_FI_(DEV_GPU_UTIL|PROF_DRAM_ACTIVE)'`.

Several exporters (`gpu.dcgm_url` as a list: one per node, or one per simulator process) are one
`DcgmFleet`: GPUs merged by their `gpu` label, which must not clash across exporters; each
failing exporter (or clash) is one error, the others' readings stay.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from collectors.base import CollectorError
from collectors.http import MIB, get_capped

DEADLINE_S = 3.0
BODY_CAP = 16 * MIB  # 8 GPUs x ~80 fields is ~100 KiB; a k8s node with pod labels a few MiB

#: DCGM field -> (raw field, sub-key or None, factor to NVML's unit)
_DEV_FIELDS: dict[str, tuple[str, str | None, float]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("utilization_pct", "gpu", 1.0),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("utilization_pct", "memory", 1.0),
    "DCGM_FI_DEV_FB_USED": ("memory_bytes", "used", float(MIB)),
    "DCGM_FI_DEV_FB_FREE": ("memory_bytes", "free", float(MIB)),
    "DCGM_FI_DEV_FB_RESERVED": ("memory_bytes", "reserved", float(MIB)),
    "DCGM_FI_DEV_POWER_USAGE": ("power_mw", None, 1000.0),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("power_limit_mw", None, 1000.0),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_mj", None, 1.0),
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_c", None, 1.0),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", None, 1.0),
    "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_mhz", None, 1.0),
}
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


def parse_exposition(text: str) -> dict[int, dict[str, Any]]:
    """dcgm-exporter text -> {gpu index: {"labels": {...}, "values": {DCGM field: value}}}. Pure."""
    gpus: dict[int, dict[str, Any]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if not s.name.startswith("DCGM_") or "GPU_I_ID" in s.labels or "gpu" not in s.labels:
                continue
            try:
                index = int(s.labels["gpu"])
            except ValueError:
                continue
            entry = gpus.setdefault(index, {"labels": dict(s.labels), "values": {}})
            # prometheus_client names a counter's samples `<family>_total`; DCGM's fields do not
            # end in _total (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION is a counter)
            name = family.name if s.name == family.name + "_total" else s.name
            entry["values"][name] = float(s.value)
    return gpus


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
    mem = fields.get("memory_bytes")
    if isinstance(mem, dict):
        if {"used", "free"} <= mem.keys():
            mem["total"] = mem["used"] + mem["free"] + mem.get("reserved", 0.0)
            mem["api"] = 2 if "reserved" in mem else 1
        else:
            errors["memory_bytes"] = _NOT_EXPORTED.format(field="DCGM_FI_DEV_FB_USED and _FREE")
            del fields["memory_bytes"]
    if "utilization_pct" not in fields:
        errors["utilization_pct"] = _NOT_EXPORTED.format(field="DCGM_FI_DEV_GPU_UTIL")
    metrics = {key: round(values[f] * factor, 4) for f, (key, factor) in _PROF_FIELDS.items() if f in values}
    if metrics:
        fields["gpm"] = {"interval_s": None, "metrics": metrics, "failed": {}}
    else:
        errors["gpm"] = _NOT_EXPORTED.format(field="DCGM_FI_PROF_DRAM_ACTIVE and the other profiling fields")
    return {"fields": fields, "errors": errors}


class DcgmBackend:
    """Reads one dcgm-exporter endpoint (e.g. http://127.0.0.1:9400/metrics) per `read_raw()`."""

    def __init__(self, url: str, *, deadline_s: float = DEADLINE_S) -> None:
        self.url = url
        self.deadline_s = deadline_s
        self._last_xid: dict[int, float] = {}
        self._driver: str | None = None

    def read_raw(self) -> list[dict[str, Any]]:
        try:
            resp = get_capped(None, self.url, deadline_s=self.deadline_s, max_bytes=BODY_CAP)
        except CollectorError:
            raise
        except Exception as exc:
            raise CollectorError(
                f"dcgm-exporter at {self.url} did not answer ({type(exc).__name__}: {exc}); check "
                "that it runs and that gpu.dcgm_url in pitwall.toml points at its /metrics."
            ) from exc
        if resp.status_code != 200:
            raise CollectorError(f"dcgm-exporter at {self.url} answered HTTP {resp.status_code}; "
                                 "check gpu.dcgm_url in pitwall.toml.")
        try:
            gpus = parse_exposition(resp.text)
        except ValueError as exc:
            raise CollectorError(f"dcgm-exporter at {self.url} sent text that is not the Prometheus "
                                 f"format ({exc}); is gpu.dcgm_url the exporter's /metrics?") from exc
        return self._raws(gpus)

    def _raws(self, gpus: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
        """{gpu index: {"labels", "values"}} -> the raw dicts of collectors/gpu_nvml.py, with
        the XID baseline kept per GPU (shared by the exporter and Prometheus readers)."""
        out = []
        for index in sorted(gpus):
            entry = gpus[index]
            raw = to_raw(entry["values"], entry["labels"])
            self._driver = entry["labels"].get("DCGM_FI_DRIVER_VERSION") or self._driver
            raw["index"] = index
            xid = entry["values"].get(_XID)
            if xid is None:
                raw["errors"]["xid_events"] = _NOT_EXPORTED.format(field=_XID)
            else:
                before = self._last_xid.get(index)
                self._last_xid[index] = xid
                changed = before is not None and xid != before and xid > 0
                raw["fields"]["xid_events"] = [{"xid": int(xid)}] if changed else []
            out.append(raw)
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

    def __init__(self, urls: list[str], *, deadline_s: float = DEADLINE_S) -> None:
        self.members = [DcgmBackend(u, deadline_s=deadline_s) for u in urls]
        self._errors: dict[str, str] = {}
        self._reported: dict[str, str] = {}

    def read_raw(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        owner: dict[int, str] = {}
        errors: dict[str, str] = {}
        for member in self.members:
            try:
                raws = member.read_raw()
            except CollectorError as exc:
                errors[member.url] = str(exc)
                continue
            for raw in raws:
                index = raw["index"]
                if index in owner:
                    errors[member.url] = (
                        f"dcgm-exporter at {member.url} reports GPU {index}, which {owner[index]} "
                        "reports too; GPU indices (the exporters' gpu label) must be distinct "
                        "across the URLs in gpu.dcgm_url, so this GPU is left out: list each "
                        "host's exporter once and give simulated GPUs distinct SGLANG_SIM_GPU_INDEX.")
                    continue
                owner[index] = member.url
                out.append(raw)
        self._errors = errors
        if errors and not out:
            raise CollectorError(" ".join(errors.values()))
        return sorted(out, key=lambda raw: int(raw["index"]))

    def problems(self) -> list[str]:
        """Errors of the last read not handed out yet (one per failing exporter)."""
        new = [msg for url, msg in self._errors.items() if self._reported.get(url) != msg]
        self._reported = dict(self._errors)
        return new

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
        gpus: dict[int, dict[str, Any]] = {}
        exporters: dict[int, str] = {}  # GPU index -> the exporter (instance) it came from
        for one in series:
            labels = {k: v for k, v in one.labels.items() if k != "__name__"}
            name = one.labels.get("__name__", "")
            if not one.points or "GPU_I_ID" in labels or not labels.get("gpu", "").isdigit():
                continue
            index, instance = int(labels["gpu"]), labels.get("instance", "")
            if exporters.setdefault(index, instance) != instance:
                raise CollectorError(
                    f"gpu.prometheus_selector {{{self.selector}}} matches more than one dcgm-exporter "
                    f"in {self.url} (GPU {index} from {exporters[index]} and from {instance}): each "
                    "GPU would mix hosts. Narrow it to this host's exporter, e.g. "
                    f'instance="{exporters[index]}" or its Hostname label.')
            entry = gpus.setdefault(index, {"labels": labels, "values": {}})
            entry["values"][name] = float(max(one.points)[1])  # the newest sample
        if not gpus:
            raise CollectorError(
                f"Prometheus {self.url} holds no DCGM_FI_* sample from the last {self.fresh_s:.0f} s "
                f"for {{{self.selector}}}; check gpu.prometheus_selector (the labels of this host's "
                "dcgm-exporter series, e.g. Hostname=\"node-1\" or instance=\"node-1:9400\") and that "
                "Prometheus scrapes the exporter.")
        return self._raws(gpus)

    def meta(self) -> dict[str, Any]:
        return {"source": "dcgm-exporter via Prometheus", "url": f"{self.url} {{{self.selector}}}",
                "driver": self._driver}
