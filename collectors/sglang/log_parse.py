"""Pure parsing of one SGLang log line: Prefill/Decode records and single-line events.

Owns the line-level grammar of SGLang's scheduler, lifecycle and error lines (0.1.14 -> 0.5.23)
and the diffusion server's prefix. Multi-line grouping (tracebacks, hard-wrapped NCCL messages) lives in
log_stream.py; file following in collectors/log_tail.py.

A record is found wherever its header sits in the physical line, so foreign prefixes (a log
shipper's timestamp, a file name), a lost opening bracket and a progress bar glued in front are
all survived. The SGLang prefix is read from the text right before the header:

    [YYYY-MM-DD HH:MM:SS(.mmm) DPd PPp ATTN_CPc MOE_DPm TPt EPe]   0.3.4+ (ranks optional)
    [HH:MM:SS TPn]                                                 0.2.14-0.3.3 (no date)
    [MM-DD HH:MM:SS]                                               diffusion server (0.5.5+)
    [gpu_id=N] / [gpu=N]                                           0.1.20-0.2.13 (no time)

Fields (names, values, which pairs count as intact, the learnt fast path) are read by
log_fields.py: a record cut by a narrow terminal keeps its intact pairs and drops the cut
one — a value is never invented.

Events found on one line are classified here (`classify_event`); a crash start opens a group
that the stream parser closes. Every function here is pure and never raises on any input.
"""

from __future__ import annotations

import re
from typing import Any

from collectors.sglang.log_diffusion import DIFFUSION_KINDS, DIFFUSION_WORDS, match_diffusion
from collectors.sglang.log_fields import Shape, match_shape, parse_fields, parse_fields_once
from storage.redact import redact_text

#: Record kinds; event kinds are storage/kinds.py's EVENT_KINDS names.
RECORD_KINDS = ("prefill", "decode", "fsm_cache", *DIFFUSION_KINDS)
EVENT_KINDS = (
    "server_ready", "oom", "prefill_oom", "decode_retract", "nccl_timeout", "crash",
    "warmup_failed", "bad_cli_flag", "port_in_use", "health_check_failed",
)
RANK_NAMES = {"DP": "dp", "PP": "pp", "ATTN_CP": "attn_cp", "MOE_DP": "moe_dp", "TP": "tp",
              "EP": "ep"}

MESSAGE_MAX = 300
EXCERPT_MAX = 4000
# --- cheap prefilter: a line that matches none of these can produce nothing -----------------
# Kept as plain substrings so the same list drives the str and bytes forms.
PREFILTER_WORDS = (
    "batch", "#running", "ready to roll", "out of memory", "OutOfMemory", "Not enough memory",
    "Retract", "atchdog", "NCCL", "[Rank", "Traceback", "xception", "sigquit", "armup",
    "error:", "already in use", "Health check failed", "fsm_cache_hit_rate",
    "Error during execution", "Error executing", "Failed to generate output", *DIFFUSION_WORDS,
)
PREFILTER = re.compile("|".join(re.escape(w) for w in PREFILTER_WORDS))
PREFILTER_B = re.compile("|".join(re.escape(w) for w in PREFILTER_WORDS).encode())

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")

_HEAD = re.compile(
    r"(Prefill batch|Decode batch|new fill batch)(?: ?\[(\d+)\])?"
    r"(?:\(mixed #running-req: (\d+)\))?(?:[.,] ?| (?=#))"
)
_JAX_ACCEPT = re.compile(r"accept_ratio ([0-9]{1,20}(?:\.[0-9]{1,20})?)%(?=#)")
_LEGACY_DECODE = re.compile(r"#running-req: \d+, #token: \d+")
_TS = (r"(?:[0-9]{4}-[0-9]{2}-[0-9]{2} |[0-9]{2}-[0-9]{2} )?"
       r"[0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]{1,6})?")
_RANKS = r"(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*"
_RANKS_ONLY = r"(?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*"
#: FastVideo-style diffusion formatter: ``INFO 02-15 13:22:25 [gpu_worker.py: 120] ``.
_FV_TAIL = r"(?P<ts2>[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}) \[[^\]\[]{1,100}: ?\d+\] "
#: The SGLang prefix ending exactly where the record header starts. Also the forms users
#: shorten by hand: ``[TP0] `` and ``TP0 `` with no timestamp.
_PREFIX_TAIL = re.compile(
    rf"\[?(?P<ts>{_TS})(?P<ranks>{_RANKS})\] (?:\[gpu(?:_id)?=(?P<gpu>\d+)\] )?$"
    r"|\[gpu(?:_id)?=(?P<gpu2>\d+)\] $"
    rf"|\[(?P<ranks2>{_RANKS_ONLY})\] $|(?:^|[\s:])(?P<ranks3>{_RANKS_ONLY}) $|{_FV_TAIL}$"
)
#: The SGLang prefix anywhere near the start of an event line.
_PREFIX_ANY = re.compile(
    rf"\[?(?P<ts>{_TS})(?P<ranks>{_RANKS})\] (?:\[gpu(?:_id)?=(?P<gpu>\d+)\] )?"
    r"|\[gpu(?:_id)?=(?P<gpu2>\d+)\] "
    rf"|^\[(?P<ranks2>{_RANKS_ONLY})\] |{_FV_TAIL}"
)
#: A date-time in a foreign prefix (Python logging config, log shipper), used when no SGLang
#: prefix is present.
_ANY_DATETIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]{1,9})?"
    r"(?:Z|[+-][0-9]{2}:?[0-9]{2})?"
)
_RANK = re.compile(r"(DP|PP|ATTN_CP|MOE_DP|TP|EP)(\d+)")


class LogRecord:
    """One recognised record or event (treat as read-only).

    `line_no` is the 1-based physical line (the first line of a grouped event); `timestamp` is
    the text inside the SGLang prefix as written (None when the line has none); `ranks` maps
    tp/dp/pp/ep/attn_cp/moe_dp (and `gpu` for the 0.1.20-0.2.13 ``[gpu=N]`` form) to ints;
    `fields` maps canonical names to numbers/booleans. Events also carry `message` (one cleaned
    line) and `raw` (the excerpt, all grouped lines).

    A record read by a learnt shape (log_fields.py) keeps the captured value texts and
    builds `fields` on first access: `parse-log` only needs `fields_json`, the fields as a JSON
    object body, which the shape makes without converting a number.
    """

    __slots__ = ("line_no", "kind", "timestamp", "ranks", "_fields", "message", "raw", "_fj",
                 "_lazy")

    def __init__(self, line_no: int, kind: str, timestamp: str | None = None,
                 ranks: dict[str, int] | None = None, fields: dict[str, Any] | None = None,
                 message: str | None = None, raw: str | None = None,
                 fields_json: str | None = None, lazy: Shape | None = None,
                 groups: tuple[str, ...] = ()) -> None:
        self.line_no = line_no
        self.kind = kind
        self.timestamp = timestamp
        self.ranks = ranks if ranks is not None else {}
        self._fields = fields if fields is not None or lazy is not None else {}
        self.message = message
        self.raw = raw
        self._fj = fields_json
        self._lazy = (lazy, groups) if lazy is not None else None

    @property
    def fields(self) -> dict[str, Any]:
        f = self._fields
        if f is None:
            assert self._lazy is not None
            f = self._fields = self._lazy[0].fields(self._lazy[1])
        return f

    @fields.setter
    def fields(self, value: dict[str, Any]) -> None:
        self._fields, self._lazy, self._fj = value, None, None

    @property
    def fields_json(self) -> str | None:
        """The fields as a JSON object body when the parser has it for free, else None."""
        if self._fj is None and self._lazy is not None:
            self._fj = self._lazy[0].json(self._lazy[1])
        return self._fj

    def _key(self) -> tuple[Any, ...]:
        return (self.line_no, self.kind, self.timestamp, self.ranks, self.fields, self.message,
                self.raw)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LogRecord) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return ("LogRecord(line_no={!r}, kind={!r}, timestamp={!r}, ranks={!r}, fields={!r}, "
                "message={!r}, raw={!r})").format(*self._key())

    def to_json_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"line_no": self.line_no, "kind": self.kind,
                             "timestamp": self.timestamp, "ranks": self.ranks,
                             "fields": self.fields}
        if self.message is not None:
            d["message"] = self.message
        return d


def clean_line(text: str) -> str:
    """Drop the line ending, ANSI colour codes and a progress bar before a carriage return."""
    if text.endswith("\n"):
        text = text[:-1]
    if text.endswith("\r"):
        text = text[:-1]
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        # tqdm redraws with bare CRs; keep the segment that holds something we read
        parts = text.split("\r")
        text = next((p for p in reversed(parts) if PREFILTER.search(p)), parts[-1])
    return text


def decode_line(line: str | bytes) -> tuple[str, bool]:
    """(text, ok): bytes are read as UTF-8; invalid bytes become U+FFFD and ok is False."""
    if isinstance(line, str):
        return line, True
    try:
        return line.decode("utf-8"), True
    except UnicodeDecodeError:
        return line.decode("utf-8", "replace"), False


def _ranks(ranks_text: str | None, gpu: str | None) -> dict[str, int]:
    out: dict[str, int] = {}
    if ranks_text:
        for name, num in _RANK.findall(ranks_text):
            out[RANK_NAMES[name]] = int(num)
    if gpu is not None:
        out["gpu"] = int(gpu)
    return out


def _prefix_groups(m: re.Match[str]) -> tuple[str | None, dict[str, int]]:
    """(timestamp, ranks) from a _PREFIX_TAIL / _PREFIX_ANY match, whichever branch matched."""
    g = m.groupdict()
    ranks = g["ranks"] or g["ranks2"] or g.get("ranks3")
    return g["ts"] or g["ts2"], _ranks(ranks, g["gpu"] or g["gpu2"])


def _prefix_before(pre: str) -> tuple[str | None, dict[str, int]]:
    """Timestamp and ranks from the text in front of a record header."""
    if not pre:
        return None, {}
    hit = _prefix_cache.get(pre)
    if hit is not None:
        return hit[0], dict(hit[1])
    short = pre[-200:]
    m = _PREFIX_TAIL.search(short)
    if m is not None:
        ts, ranks = _prefix_groups(m)
    else:
        dts = _ANY_DATETIME.findall(short)
        ts, ranks = (dts[-1] if dts else None), {}
    if len(pre) <= 80:
        # a busy server writes many lines per second with the same prefix
        if len(_prefix_cache) >= 512:
            _prefix_cache.clear()
        _prefix_cache[pre] = (ts, ranks)
    return ts, dict(ranks)


_prefix_cache: dict[str, tuple[str | None, dict[str, int]]] = {}


def split_prefix(text: str) -> tuple[str | None, dict[str, int], str]:
    """(timestamp, ranks, message) of an event line; the message is what follows the prefix."""
    head = text[:300]
    m = _PREFIX_ANY.search(head)
    if m is not None:
        ts, ranks = _prefix_groups(m)
        return ts, ranks, text[m.end():].strip()
    dts = _ANY_DATETIME.findall(head)
    return (dts[-1] if dts else None), {}, text.strip()


def parse_record(text: str, line_no: int = 0) -> LogRecord | None:
    """A Prefill/Decode record from a cleaned line, or None (None also when no pair is intact)."""
    m = _HEAD.search(text)
    if m is not None:
        kind = "decode" if m[1][0] == "D" else "prefill"
        start, pos = m.start(), m.end()
        extra = m[2] is not None or m[3] is not None
    else:
        m = _LEGACY_DECODE.search(text)
        if m is None:
            return None
        kind = "decode"
        pos = start = m.start()
        extra = False
    ts, ranks = _prefix_before(text[:start]) if start else (None, {})
    if "accept_ratio " in text:  # sglang-jax: `#queue-req: 0, accept_ratio 80.00%#cache_miss: 2`
        text = _JAX_ACCEPT.sub(r"accept_ratio: \1%, ", text)
    hit = match_shape(text, pos)
    if hit is not None and not extra:
        return LogRecord(line_no, kind, ts, ranks, None, None, None, None, hit[0], hit[1])
    fields = hit[0].fields(hit[1]) if hit is not None else parse_fields(text, pos)
    fj = hit[0].json(hit[1]) if hit is not None else None
    if extra:
        if m[2] is not None:
            fields["iteration"] = int(m[2])
            if fj is not None:
                fj += f', "iteration": {fields["iteration"]}'
        if m[3] is not None:
            fields["mixed_running_req"] = int(m[3])
            if fj is not None:
                fj += f', "mixed_running_req": {fields["mixed_running_req"]}'
    if not fields:
        return None
    return LogRecord(line_no, kind, ts, ranks, fields, None, None, fj)


# --- single-line events ---------------------------------------------------------------------

_RETRACT = re.compile(
    r"(?:[Dd]ecode out of memory happened|KV cache pool is full\. Retract requests)[.,]"
    r" #retracted_reqs: (\d+)"
)
_RATIO = re.compile(r"#new_token_ratio: (\d+(?:\.\d+)?) -> (\d+(?:\.\d+)?)")
_GAINED = re.compile(r"#new_tokens_gained: (\d+)")
_OOM = re.compile(
    r"(?:CUDA|HIP|NPU|XPU|MUSA) out of memory|OutOfMemoryError|CUDA error: out of memory"
    r"|Not enough memory\. Please try to increase|Decode out of memory\. (?:Try|This)"
)
_TRY_ALLOC = re.compile(r"Tried to allocate (\d+(?:\.\d+)?) ?(GiB|MiB|KiB|GB|MB)")
_BAD_FLAG = re.compile(
    r"error: (?:unrecognized arguments|argument [^:]+: (?:invalid|expected|ignored)"
    r"|the following arguments are required|ambiguous option)"
)
_PORT = re.compile(r"[Aa]ddress already in use|[Pp]ort \d+ (?:is )?already in use")
_WARMUP = re.compile(r"warmup error|[Ww]armup (?:request )?failed")
#: Scheduler crashes that open a grouped event (log_stream.py groups what follows).
CRASH_START = re.compile(
    r"Traceback \(most recent call last\)|\w+ hit an exception|Exception in ModelTpServer"
    r"|Exception in run_tp_server|Received sigquit from a child process"
    r"|[Ww]atchdog timeout \(self\.watchdog_timeout"
    # diffusion runtime errors, logged with exc_info (the traceback follows)
    r"|\] Error during execution after \d|Error executing (?:grouped )?request "
    r"|Failed to generate output for prompt"
)
#: NCCL hang phrases, compared with all whitespace removed (hard wraps may add or eat spaces).
NCCL_PHRASES = ("Watchdogcaughtcollectiveoperationtimeout", "ProcessGroupNCCL'swatchdoggotstuck")
_WS = re.compile(r"\s+")

_UNITS = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10, "GB": 10**9, "MB": 10**6}


def nccl_match(text: str) -> bool:
    squeezed = _WS.sub("", text)
    return any(p in squeezed for p in NCCL_PHRASES)


def classify_event(text: str) -> tuple[str, dict[str, Any]] | None:
    """(kind, fields) of a single-line event in a cleaned line, crash starts excluded."""
    if "etract" in text or "happened" in text:
        m = _RETRACT.search(text)
        if m is not None:
            fields: dict[str, Any] = {"retracted_req": int(m[1])}
            r = _RATIO.search(text)
            if r is not None:
                fields["new_token_ratio_before"] = float(r[1])
                fields["new_token_ratio_after"] = float(r[2])
            g = _GAINED.search(text)
            if g is not None:
                fields["new_tokens_gained"] = int(g[1])
            return "decode_retract", fields
    if "Prefill out of memory" in text:
        return "prefill_oom", {}
    if "emory" in text:
        m = _OOM.search(text)
        if m is not None:
            fields = {}
            a = _TRY_ALLOC.search(text)
            if a is not None:
                fields["tried_to_allocate_bytes"] = int(float(a[1]) * _UNITS[a[2]])
            return "oom", fields
    if nccl_match(text):
        return "nccl_timeout", {}
    if "ready to roll" in text and "The server is fired up" in text:
        return "server_ready", {}
    if "armup" in text and _WARMUP.search(text):
        return "warmup_failed", {}
    if "error:" in text and _BAD_FLAG.search(text):
        return "bad_cli_flag", {}
    if "already in use" in text and _PORT.search(text):
        return "port_in_use", {}
    if "Health check failed" in text:
        return "health_check_failed", {}
    return None


def make_event(kind: str, text: str, line_no: int, fields: dict[str, Any] | None = None,
               raw: str | None = None) -> LogRecord:
    ts, ranks, msg = split_prefix(text)
    return LogRecord(line_no, kind, ts, ranks, fields or {}, message=msg[:MESSAGE_MAX],
                     raw=excerpt(raw if raw is not None else text))


def excerpt(text: str) -> str:
    """At most EXCERPT_MAX characters: the head and the tail, which say what and why. Secrets
    are masked first (storage/redact.py), so the cut never leaves half an API key behind."""
    text = redact_text(text)
    if len(text) <= EXCERPT_MAX:
        return text
    half = EXCERPT_MAX // 2
    return text[:half] + "\n[... cut ...]\n" + text[-half:]


def parse_line(line: str | bytes, line_no: int = 1) -> LogRecord | None:
    """One physical line -> a record, a single-line event, or None. Never raises.

    Multi-line events need parse_stream (log_stream.py): here a crash start becomes a
    one-line `crash` event and a hard-wrapped NCCL message is only seen when whole.
    """
    text, _ = decode_line(line)
    text = clean_line(text)
    if not PREFILTER.search(text):
        return None
    return parse_clean(text, line_no)


#: The 0.1.x FSM-cache statistic line's fields (read by the generic field grammar, units included).
FSM_FIELDS = frozenset({"fsm_cache_hit_rate", "fsm_cache_avg_init_time_s", "ff_cache_hit_rate",
                        "ff_cache_avg_init_time_s"})


def parse_other(text: str, line_no: int) -> LogRecord | None:
    """A diffusion record (log_diffusion.py) or a 0.1.x FSM-cache statistic line, or None.

    ``fsm_cache_hit_rate: 0.00%. fsm_cache_avg_init_time: 0.00s. ff_cache_hit_rate: 0.00%.
    ff_cache_avg_init_time: 0.00s.`` (DEBUG, after each ``new fill batch`` up to 0.1.x) gives
    kind ``fsm_cache``: hit rates as written (percent), init times in seconds (the ``s`` unit,
    log_fields.py); a cut line keeps its intact pairs.
    """
    hit = match_diffusion(text)
    if hit is not None:
        start, kind, fields = hit
        ts, ranks = _prefix_before(text[:start]) if start else (None, {})
        return LogRecord(line_no, kind, ts, ranks, fields)
    start = text.find("fsm_cache_hit_rate: ")
    if start >= 0:
        fields = {k: v for k, v in parse_fields_once(text, start).items()
                  if k in FSM_FIELDS and not isinstance(v, bool)}
        if fields:  # a cut line keeps its intact pairs (log_fields.py)
            ts, ranks = _prefix_before(text[:start]) if start else (None, {})
            return LogRecord(line_no, "fsm_cache", ts, ranks, fields)
    return None


def parse_clean(text: str, line_no: int) -> LogRecord | None:
    """parse_line for a line already cleaned and known to pass the prefilter."""
    if "batch" in text or "#running" in text:
        rec = parse_record(text, line_no)
        if rec is not None:
            return rec
    rec = parse_other(text, line_no)
    if rec is not None:
        return rec
    ev = classify_event(text)
    if ev is not None:
        return make_event(ev[0], text, line_no, ev[1])
    if CRASH_START.search(text):
        return make_event("crash", text, line_no)
    return None
