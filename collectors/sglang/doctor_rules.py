"""SGLang's doctor rules: its own tuning guidance, each rule with its evidence and a suggested
change as profile flags (the Engine's `tuning_rules`; collectors/tuning.py holds the types).

SGLang's guidance (its docs/advanced_features/hyperparameter_tuning.md): a healthy `#queue-req` is
non-zero; token usage below 0.9 while requests wait means the scheduler is too conservative
(lower `--schedule-conservativeness`, e.g. 0.3, or raise `--max-running-requests`); frequent
decode retractions at high token usage mean it is not conservative enough (raise it, e.g. 1.3);
prefill OOMs call for a smaller `--chunked-prefill-size` or `--mem-fraction-static`; a running
batch above the CUDA-graph batch size runs without graphs (raise `--cuda-graph-max-bs`).
Speculative decoding pays only while a verify keeps enough drafted tokens (accept length);
HiCache's host tier while loading a token back costs less than recomputing it and its pool has
room (collectors/sglang/doctor_hicache.py).
Pitwall's own GPU wall (scorecard/gpu_wall.py) adds one: a GPU near neither wall while
requests run or wait is underfed (launch overhead, CPU-side scheduling, too small a batch);
image servers get its stage form (denoising steps near neither wall: compile, batch).

Server args are the names SGLang's server info reports (`schedule_conservativeness`); flags
are its launch flags without dashes. Every rule is pure, tested firing and not firing.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from collectors.sglang import doctor_hicache as hicache
from collectors.sglang import doctor_pd as pd
from collectors.tuning import Evidence, Finding, TuningRules
from storage import series_keys as sk

GIB = 2**30
QUEUE_KEYS = (sk.LOG_QUEUE_REQ, sk.METRICS_NUM_QUEUE_REQS)
USAGE_KEYS = (sk.LOG_TOKEN_USAGE, sk.METRICS_TOKEN_USAGE)
RUNNING_KEYS = (sk.LOG_RUNNING_REQ, sk.METRICS_NUM_RUNNING_REQS)
HIT_KEYS = (sk.LOG_CACHE_HIT_RATE, sk.METRICS_CACHE_HIT_RATE)
HEADROOM_MIN_BYTES = 5 * GIB
RETRACT_PER_MIN = 1.0
LOW_HIT_RATE = 0.3


def rule_too_conservative(ev: Evidence) -> Finding | None:
    queue, usage = ev.first(QUEUE_KEYS), ev.first(USAGE_KEYS)
    if queue.size < 5 or usage.size < 5:
        return None
    waiting = float(np.mean(queue > 0))
    usage_p50 = float(np.percentile(usage, 50))
    if waiting < 0.5 or usage_p50 >= 0.9:
        return None
    cons = ev.arg("schedule_conservativeness")
    mrr = ev.arg("max_running_requests")
    flags: dict[str, Any] = {"schedule-conservativeness": 0.3}
    if isinstance(mrr, int) and mrr > 0:
        flags["max-running-requests"] = mrr * 2
    return Finding("too_conservative", "Requests wait while KV cache is free",
                   f"queue non-empty in {waiting * 100:.0f} % of {queue.size} samples while token usage p50 is "
                   f"{usage_p50:.2f} (< 0.9); schedule-conservativeness {cons if cons is not None else '?'}",
                   "Lower --schedule-conservativeness (SGLang suggests 0.3) or raise --max-running-requests.", flags)


def rule_retractions(ev: Evidence) -> Finding | None:
    usage = ev.first(USAGE_KEYS)
    n = ev.events.get("decode_retract", 0)
    per_min = n / ev.minutes
    if usage.size == 0 or float(np.percentile(usage, 90)) <= 0.9 or per_min <= RETRACT_PER_MIN:
        return None
    cons = ev.arg("schedule_conservativeness")
    new = round(max(float(cons or 1.0) * 1.3, 1.3), 2)
    return Finding("retractions", "Decode retractions at high token usage",
                   f"{n} decode retractions in {ev.minutes:.0f} min ({per_min:.1f}/min) with token usage p90 "
                   f"{float(np.percentile(usage, 90)):.2f} (> 0.9)",
                   "Raise --schedule-conservativeness (e.g. 1.3) or lower --max-running-requests.",
                   {"schedule-conservativeness": new})


def rule_prefill_oom(ev: Evidence) -> Finding | None:
    n = ev.events.get("prefill_oom", 0)
    if n == 0:
        return None
    chunk = ev.arg("chunked_prefill_size")
    mfs = ev.arg("mem_fraction_static")
    flags: dict[str, Any] = {"chunked-prefill-size": max(int(chunk) // 2, 512) if isinstance(chunk, int) and chunk > 0 else 4096}
    if isinstance(mfs, (int, float)):
        flags["mem-fraction-static"] = round(float(mfs) - 0.05, 2)
    return Finding("prefill_oom", "Prefill ran out of KV cache",
                   f"{n} prefill OOM event{'s' if n != 1 else ''} in the window; chunked-prefill-size "
                   f"{chunk if chunk is not None else '?'}, mem-fraction-static {mfs if mfs is not None else '?'}",
                   "Lower --chunked-prefill-size, or --mem-fraction-static to leave activations more room.", flags)


def rule_gpu_headroom(ev: Evidence) -> Finding | None:
    if not ev.gpu_free_bytes:
        return None
    least = min(ev.gpu_free_bytes)
    if least >= HEADROOM_MIN_BYTES:
        return None
    mfs = ev.arg("mem_fraction_static")
    new = round(float(mfs) - 0.05, 2) if isinstance(mfs, (int, float)) else 0.8
    return Finding("gpu_headroom", "Little GPU memory left after load",
                   f"the fullest GPU has {least / GIB:.1f} GiB free (median over the window; under "
                   f"{HEADROOM_MIN_BYTES / GIB:.0f} GiB risks OOM on activation peaks)",
                   "Lower --mem-fraction-static.", {"mem-fraction-static": new})


def rule_radix_hit(ev: Evidence) -> Finding | None:
    if ev.prompt_set != "shared-prefix":
        return None
    hits = ev.first(HIT_KEYS)
    if hits.size == 0:
        return None
    mean = float(np.mean(hits))
    if mean >= LOW_HIT_RATE:
        return None
    off = bool(ev.arg("disable_radix_cache"))
    policy = ev.arg("schedule_policy")
    flags: dict[str, Any] = {"schedule-policy": "lpm"}
    if off:
        flags["disable-radix-cache"] = False
    return Finding("radix_hit", "Low radix cache hit rate on a shared-prefix workload",
                   f"cache hit rate {mean:.2f} (mean of {hits.size} samples) on a shared-prefix workload; "
                   f"radix cache {'off' if off else 'on'}, schedule-policy {policy or '?'}",
                   "Check the prompt layout (shared part first) and use --schedule-policy lpm"
                   + (" with the radix cache on." if off else "."), flags)


def rule_cuda_graph(ev: Evidence) -> Finding | None:
    bs = ev.arg("cuda_graph_max_bs", "cuda_graph_max_bs_decode")
    running = ev.first(RUNNING_KEYS)
    if not isinstance(bs, int) or bs <= 0 or running.size == 0 or ev.arg("disable_cuda_graph"):
        return None
    p90 = float(np.percentile(running, 90))
    if p90 <= bs:
        return None
    new = 2 ** math.ceil(math.log2(p90))
    key = "cuda-graph-max-bs" if "cuda_graph_max_bs" in ev.server_args else "cuda-graph-max-bs-decode"
    return Finding("cuda_graph", "Running batch above the CUDA-graph batch size",
                   f"running requests p90 {p90:.0f} > cuda-graph max bs {bs}: those steps run without CUDA graphs",
                   f"Raise --{key} (to {new}).", {key: new})


UNDERFED_SHARE = 0.5  # of a GPU's GPM samples in the window


def rule_gpu_underfed(ev: Evidence) -> Finding | None:
    """The GPU wall says "neither" while requests run or wait for most of the window: the GPU is
    underfed, not at a hardware wall. A GPU that is mostly idle for want of requests also reads
    "neither" (it waits on the host), but raising the batch would not help it: those samples
    are not counted (`neither_queued_share`)."""
    fed = [g for g in ev.gpu_walls if g.get("neither_queued_share", 0.0) >= UNDERFED_SHARE]
    if not fed:
        return None
    g = fed[0]
    tensor = g.get("tensor_ratio")
    mrr = ev.arg("max_running_requests")
    flags: dict[str, Any] = {"max-running-requests": mrr * 2} if isinstance(mrr, int) and mrr > 0 else {}
    if ev.arg("disable_cuda_graph") is True:
        flags["disable-cuda-graph"] = False
    return Finding("gpu_underfed", "GPU underfed while requests wait",
                   f"{g.get('label') or 'GPU ' + str(g['index'])} ({g.get('name') or '?'}): near neither wall in {g['neither_queued_share'] * 100:.0f} % "
                   f"of {g['samples']} GPM samples (DRAM bandwidth {g['dram_ratio'] * 100:.0f} %, tensor "
                   f"{'?' if tensor is None else f'{tensor * 100:.0f}'} %) while requests ran or waited",
                   "Look for launch overhead or CPU-side scheduling (CUDA graphs on, a faster tokenizer or "
                   "host), or give it bigger batches: raise --max-running-requests.", flags)


def rule_image_step_underfed(ev: Evidence) -> Finding | None:
    """Image servers: the denoising steps run near neither wall — the card's memory bandwidth and
    its tensor cores both mostly idle while the stage runs — so seconds per step are far above
    what the card allows (launch overhead, CPU-side work, no compilation, batch of one)."""
    sw = ev.stage_walls
    if not sw.get("available"):
        return None
    idle = sw["shares"].get("neither", 0.0) + sw["shares"].get("idle", 0.0)
    if idle < UNDERFED_SHARE:
        return None
    step = sw.get("step_s")
    flags: dict[str, Any] = {}
    if ev.arg("enable_torch_compile") is not True:
        flags["enable-torch-compile"] = True
    return Finding("image_step_underfed", "Denoising steps far slower than the card allows",
                   f"{idle * 100:.0f} % of {sw['covered_s']:.0f} s of DenoisingStage ran near neither wall "
                   f"(bandwidth-bound {sw['bandwidth_share'] * 100:.0f} %, compute-bound {sw['compute_share'] * 100:.0f} %, "
                   f"held by power {(sw.get('power_share') or 0.0) * 100:.0f} %)"
                   + (f"; {step:.3f} s per step on {sw.get('spec') or 'this card'}" if step else ""),
                   "Compile the model (--enable-torch-compile), batch requests (--batching-max-size above 1), "
                   "or look for CPU-side work between steps.", flags)


ACCEPT_KEYS = (sk.LOG_ACCEPT_LEN, sk.METRICS_SPEC_ACCEPT_LENGTH)
#: tokens a verify must keep on average for speculation to pay: in the memory-bound decode of
#: small batches a verify over a few draft positions plus the drafting costs about 1.2-1.5 plain
#: decode steps, so fewer than 1.5 tokens a step are slower than no speculation
ACCEPT_LEN_MIN = 1.5


def rule_speculation_does_not_pay(ev: Evidence) -> Finding | None:
    """A server that speculates (`speculative_algorithm`) keeps too few drafted tokens: each
    decode step pays for drafting and for verifying `speculative_num_draft_tokens` positions a
    request, and wins only its accept length in tokens."""
    algo = ev.arg("speculative_algorithm")
    accept = ev.first(ACCEPT_KEYS)
    if not algo or accept.size < 5:
        return None
    p50 = _pct(accept, 50)
    if p50 >= ACCEPT_LEN_MIN:
        return None
    steps, drafts = ev.arg("speculative_num_steps"), ev.arg("speculative_num_draft_tokens")
    flags: dict[str, Any] = {}
    if isinstance(steps, int) and steps > 1:
        flags["speculative-num-steps"] = 1
        flags["speculative-num-draft-tokens"] = 2
    return Finding("speculation_does_not_pay", "Speculative decoding keeps too few drafts",
                   f"{algo}: accept length p50 {p50:.2f} tokens a step over {accept.size} samples (< {ACCEPT_LEN_MIN:g}), "
                   f"each verify checking {drafts if drafts is not None else '?'} positions a request "
                   f"after {steps if steps is not None else '?'} draft steps",
                   "Draft less (--speculative-num-steps 1, --speculative-num-draft-tokens 2), or relaunch without "
                   "--speculative-algorithm and compare ITL and cost per token on the Compare page.", flags)


RULES = (rule_too_conservative, rule_retractions, rule_prefill_oom, rule_gpu_headroom, rule_radix_hit,
         rule_cuda_graph, rule_gpu_underfed, rule_image_step_underfed, rule_speculation_does_not_pay,
         *hicache.RULES, *pd.RULES)


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q))


def checked(ev: Evidence) -> list[str]:
    """What each rule measured in the window and where it would fire, one line a rule, so a
    quiet Doctor shows its reading rather than nothing (an idle demo fires no rule: that is
    the right answer, not a missing one)."""
    queue, usage, running = ev.first(QUEUE_KEYS), ev.first(USAGE_KEYS), ev.first(RUNNING_KEYS)
    out = []
    if queue.size and usage.size:
        out.append(f"Queue against KV cache: requests waited in {float(np.mean(queue > 0)) * 100:.0f} % "
                   f"of {queue.size} samples, token usage p50 {_pct(usage, 50):.2f} (fires when they "
                   "wait half the time with usage under 0.9).")
    else:
        out.append("Queue against KV cache: no queue or token-usage samples in the window.")
    n = ev.events.get("decode_retract", 0)
    usage_p90 = f"{_pct(usage, 90):.2f}" if usage.size else "not measured"
    out.append(f"Decode retractions: {n} in {ev.minutes:.0f} min, token usage p90 {usage_p90} (fires "
               f"above {RETRACT_PER_MIN:g}/min with usage p90 over 0.9).")
    out.append(f"Prefill OOMs: {ev.events.get('prefill_oom', 0)} (fires on any).")
    out.append(f"GPU memory headroom: the fullest GPU has {min(ev.gpu_free_bytes) / GIB:.1f} GiB free "
               f"(fires under {HEADROOM_MIN_BYTES / GIB:.0f} GiB)." if ev.gpu_free_bytes
               else "GPU memory headroom: no GPU memory figures.")
    hits = ev.first(HIT_KEYS)
    hit = f"{float(np.mean(hits)):.2f}" if hits.size else "not measured"
    workload = f"a {ev.prompt_set}" if ev.prompt_set else "an unknown"
    out.append(f"Radix cache: hit rate {hit} on {workload} workload (judged only on a "
               f"shared-prefix sweep; fires under {LOW_HIT_RATE:g}).")
    bs = ev.arg("cuda_graph_max_bs", "cuda_graph_max_bs_decode")
    p90 = f"{_pct(running, 90):.0f}" if running.size else "not measured"
    out.append(f"CUDA graphs: running requests p90 {p90} against cuda-graph max bs "
               f"{bs if bs is not None else 'unknown'} (fires above it).")
    if ev.gpu_walls:
        worst = max(ev.gpu_walls, key=lambda g: g.get("shares", {}).get("neither", 0.0))
        out.append(f"GPU wall: near neither wall in {worst.get('shares', {}).get('neither', 0.0) * 100:.0f} % of "
                   f"{worst.get('samples', 0)} GPM samples while requests ran (fires at "
                   f"{UNDERFED_SHARE * 100:.0f} %).")
    if ev.arg("speculative_algorithm"):
        accept = ev.first(ACCEPT_KEYS)
        got = f"p50 {_pct(accept, 50):.2f}" if accept.size else "not measured"
        out.append(f"Speculative decoding ({ev.arg('speculative_algorithm')}): accept length {got} tokens a step "
                   f"(fires under {ACCEPT_LEN_MIN:g}).")
    if ev.stage_walls.get("available"):
        idle = ev.stage_walls["shares"].get("neither", 0.0) + ev.stage_walls["shares"].get("idle", 0.0)
        out.append(f"Denoising: {idle * 100:.0f} % of the stage near neither wall (fires at "
                   f"{UNDERFED_SHARE * 100:.0f} %).")
    return out + hicache.checked(ev) + pd.checked(ev)


TUNING = TuningRules(series=(*QUEUE_KEYS, *USAGE_KEYS, *RUNNING_KEYS, *HIT_KEYS, *ACCEPT_KEYS, *hicache.SERIES,
                             *pd.SERIES),
                     rules=RULES,
                     checked=checked)
