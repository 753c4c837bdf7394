"""Clock-event (throttle) reasons: why a GPU's clocks run below their maximum.

The bits are nvml.h's `nvmlClocksEventReason*` (`nvidia-smi -q -d PERFORMANCE` lists them by
name); dcgm-exporter's DCGM_FI_DEV_CLOCKS_EVENT_REASONS (DCGM_FI_DEV_CLOCK_THROTTLE_REASONS in
older exporters) carries the same bitmask. Read by the GPU collectors (the `clock_event_reasons`,
`throttle_power` and `throttle_thermal` series) and by the GPU-wall verdict (what holds a clock).
"""

from __future__ import annotations

REASON_GPU_IDLE = 0x1
REASON_APP_CLOCKS = 0x2
REASON_SW_POWER_CAP = 0x4
REASON_HW_SLOWDOWN = 0x8
REASON_SYNC_BOOST = 0x10
REASON_SW_THERMAL = 0x20
REASON_HW_THERMAL = 0x40
REASON_HW_POWER_BRAKE = 0x80
POWER_REASONS = REASON_SW_POWER_CAP | REASON_HW_POWER_BRAKE
THERMAL_REASONS = REASON_SW_THERMAL | REASON_HW_THERMAL | REASON_HW_SLOWDOWN
#: the reasons that hold a busy GPU's clock down (idle and the operator's own clock settings don't)
HOLDING_REASONS = POWER_REASONS | THERMAL_REASONS

REASON_NAMES: dict[int, str] = {
    REASON_GPU_IDLE: "idle",
    REASON_APP_CLOCKS: "application clock setting",
    REASON_SW_POWER_CAP: "software power cap",
    REASON_HW_SLOWDOWN: "hardware slowdown",
    REASON_SYNC_BOOST: "sync boost",
    REASON_SW_THERMAL: "software thermal slowdown",
    REASON_HW_THERMAL: "hardware thermal slowdown",
    REASON_HW_POWER_BRAKE: "hardware power brake",
}


def reason_names(bits: int) -> list[str]:
    """The names of the reason bits set in `bits`, lowest bit first (unknown bits as hex)."""
    names = [name for bit, name in REASON_NAMES.items() if bits & bit]
    rest = bits & ~sum(REASON_NAMES)
    return names + ([f"other (0x{rest:x})"] if rest else [])
