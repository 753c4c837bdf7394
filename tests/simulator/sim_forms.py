"""SGLang 0.5.23 line forms, written from SGLang 0.5.23's source (scheduler, lifecycle, diffusion).

``check_log(text)`` classifies every line of a simulator log and returns the lines that look like
a documented SGLang line (by their leading words) but do not match its documented form.
"""

from __future__ import annotations

import re

# Prefix: "[" + asctime + rank tags + "] " + message; 0.5.9+ rank order DP, PP, ATTN_CP, MOE_DP,
# TP, EP; SGLANG_LOG_MS=1 adds .mmm.
PREFIX = re.compile(r"^\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{3})?)"
                    r"(?P<ranks>(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] (?P<msg>.*)$")
DIFFUSION_PREFIX = re.compile(r"^\[(?P<ts>\d{2}-\d{2} \d{2}:\d{2}:\d{2})\] (?P<msg>.*)$")
NUM = r"\d+"
F2 = r"\d+\.\d{2}"
# Prefill line, 0.5.11 - 0.5.23 (no optional extras: no PD, no replay, no MFU suffixes).
PREFILL = re.compile(
    rf"^Prefill batch, #new-seq: {NUM}, #new-token: {NUM}, #cached-token: {NUM}, "
    rf"token usage: {F2}, #running-req: {NUM}, #queue-req: {NUM}, #pending-token: {NUM}, "
    rf"cuda graph: (?:True|False), input throughput \(token/s\): {F2}$")
# Decode line, 0.5.9 - 0.5.23 (no trailing comma, no speculative fields).
DECODE = re.compile(
    rf"^Decode batch, #running-req: {NUM}, #token: {NUM}, token usage: {F2}, "
    rf"cuda graph: (?:True|False), gen throughput \(token/s\): {F2}, #queue-req: {NUM}$")
# Lifecycle and error lines.
RETRACT = re.compile(r"^KV cache pool is full\. Retract requests\. #retracted_reqs: (\d+), "
                     r"#new_tokens_gained: -?\d+, #new_token_ratio: \d\.\d{4} -> \d\.\d{4}$")
READY = re.compile(r"^The server is fired up and ready to roll!$")
SUMMARY = re.compile(rf"^max_total_num_tokens={NUM}, chunked_prefill_size=-?{NUM}, "
                     rf"max_prefill_tokens={NUM}, max_running_requests={NUM}, "
                     rf"context_len={NUM}, available_gpu_mem=-?{F2} GB$")
LOAD_BEGIN = re.compile(rf"^Load weight begin\. avail mem={F2} GB$")
LOAD_END = re.compile(rf"^Load weight end\. elapsed={F2} s, type=\w+, avail mem=-?{F2} GB, "
                      rf"mem usage={F2} GB\.$")
MEMPOOL = re.compile(rf"^Memory pool end\. avail mem=-?{F2} GB$")
GRAPH = re.compile(r"^Capture .*(cuda|CUDA) graph (begin|end)")
STARTUP_OOM = re.compile(r"^Not enough memory\. Please try to increase --mem-fraction-static\."
                         r"( Current value: mem_fraction_static=[\d.]+)?$")
CRASH = re.compile(r"^Scheduler hit an exception: Traceback \(most recent call last\):$")
SIGQUIT = re.compile(r"^Received sigquit from a child process\. It usually means the child "
                     r"failed\.$")
HEALTH_FAILED = re.compile(r"^Health check failed\. Server couldn't get a response from "
                           r"detokenizer for last \d+ seconds\. tic start time: "
                           r"\d{2}:\d{2}:\d{2}\. last_heartbeat time: \d{2}:\d{2}:\d{2}$")
ABORT = re.compile(r"^Request is disconnected from the client side \(type 1\)\. "
                   r"Abort request obj\.rid='[^']*'$")
# Uvicorn's own lines, as the real CPU server prints them.
UVICORN = re.compile(r"^(INFO|WARNING|ERROR):\s+\S.*$")
UVICORN_LEVEL = re.compile(r"^(?:INFO: {5}|WARNING: {2}|ERROR: {4})\S")
ACCESS = re.compile(r'^INFO: {5}\d+\.\d+\.\d+\.\d+:\d+ - "(?:GET|POST|PUT|DELETE) \S+ HTTP/1\.1" '
                    r"\d{3}(?: [A-Za-z ]+)?$")
RUNNING = re.compile(r"^INFO: {5}Uvicorn running on http://[\d.]+:\d+ \(Press CTRL\+C to quit\)$")
BIND_ERROR = re.compile(r"^ERROR: {4}\[Errno 98\] error while attempting to bind on address "
                        r"\('[\d.]+', \d+\): address already in use$")
# Generic key/value reader: every field of our lines must parse with it.
KV = re.compile(r"(?:^|(?<=, )|(?<=\. ))(?P<key>[#A-Za-z][^:,]*?): "
                r"(?P<val>-?\d+(?:\.\d+)?%?|True|False)(?=$|,|\.(?:\s|$))")
HEAD = re.compile(r"^(?P<kind>Prefill batch|Decode batch|new fill batch)(?: \[(?P<iter>\d+)\])?"
                  r"(?:\(mixed #running-req: (?P<mixed>\d+)\))?[.,] ?")

# (leading words, documented form)
FORMS: list[tuple[str, re.Pattern[str]]] = [
    ("Prefill batch", PREFILL), ("Decode batch", DECODE), ("KV cache pool is full", RETRACT),
    ("The server is fired up", READY), ("max_total_num_tokens=", SUMMARY),
    ("Load weight begin", LOAD_BEGIN), ("Load weight end", LOAD_END),
    ("Memory pool end", MEMPOOL), ("Capture ", GRAPH), ("Not enough memory", STARTUP_OOM),
    ("Scheduler hit an exception", CRASH), ("Received sigquit", SIGQUIT),
    ("Health check failed", HEALTH_FAILED), ("Request is disconnected", ABORT),
    ('INFO:     Uvicorn running', RUNNING), ("ERROR:    [Errno 98]", BIND_ERROR),
]


def check_log(text: str) -> tuple[list[str], dict[str, int]]:
    """(bad lines, count of lines per form) for an LLM-server log."""
    bad: list[str] = []
    counts: dict[str, int] = {}
    for line in text.splitlines():
        m = PREFIX.match(line)
        if not m:
            continue
        msg = m.group("msg")
        if msg.startswith(("INFO:", "WARNING:", "ERROR:")):
            if not UVICORN_LEVEL.match(msg):
                bad.append(line)
            if '" ' in msg and " - \"" in msg:
                counts["access"] = counts.get("access", 0) + 1
                if not ACCESS.match(msg):
                    bad.append(line)
        for lead, form in FORMS:
            if msg.startswith(lead):
                counts[lead] = counts.get(lead, 0) + 1
                if not form.match(msg):
                    bad.append(line)
        if m.group("ranks") and not re.fullmatch(r"(?: DP\d+)?(?: TP\d+)?", m.group("ranks")):
            bad.append(line)
    return bad, counts


def batch_fields(text: str, kind: str) -> list[dict[str, float]]:
    """Parsed key/values of every ``kind`` ("Prefill batch"/"Decode batch") line."""
    out = []
    for line in text.splitlines():
        m = PREFIX.match(line)
        if not m or not m.group("msg").startswith(kind):
            continue
        body = HEAD.sub("", m.group("msg"), count=1)
        out.append({k.group("key"): float(k.group("val").rstrip("%").replace("True", "1")
                                          .replace("False", "0"))
                    for k in KV.finditer(body)})
    return out
