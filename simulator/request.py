"""One generation request as the scheduler and the HTTP layer share it.

Token counts are ints; ``*_model`` times are model seconds (see scheduler). ``target`` is what a
(re)admission must prefill: the prompt, or prompt + output so far after a retraction. KV slots:
``tree_len`` tokens are in the radix tree under the locked ``node``, ``private`` more are the
request's own (uncached prompt part, generated tokens).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from simulator.radix import Node
from simulator.tokenizer import Generator, ScriptedGenerator


@dataclass
class SimRequest:
    rid: str
    input_ids: list[int]
    max_new_tokens: int
    gen: Generator | ScriptedGenerator
    stream: bool = False
    priority: int = 0  # the order key of the priority policy / priority scheduling
    #: the priorities as SGLang 0.5.23 labels them: the request's own (the tokenizer's histograms
    #: and counters; "" without one), and the scheduler's, which --default-priority-value fills
    #: in (the queue gauges' breakdown; "None" when neither is set)
    api_priority: int | None = None
    sched_priority: int | None = None
    host_cached: int = 0  # of cached_tokens, those HiCache loaded back from host memory
    host_loaded: int = 0  # loaded back for it while it waited (an attempt that did not fit counts)
    verify_ct: int = 0  # speculative verify forwards this request took part in (spec_verify_calls_total)
    is_health: bool = False
    room: int = -1  # PD: the bootstrap room (simulator/disagg.py); pd_*: when it entered PD's queues
    pd_entry: float = 0.0
    pd_mark: float = 0.0
    is_warmup: bool = False  # startup warm-up: not counted by --sim-fault thresholds
    arrival_model: float = 0.0
    arrival_wall: float = 0.0  # epoch seconds
    output_ids: list[int] = field(default_factory=list)
    target: list[int] = field(default_factory=list)  # ids to prefill on (re)admission
    filled: int = 0
    tree_len: int = 0
    node: Node | None = None
    private: int = 0
    admitted: bool = False
    cached_tokens: int = 0
    num_retractions: int = 0
    queue_start_model: float = 0.0
    queue_time: float = 0.0
    first_token_model: float | None = None
    last_token_model: float | None = None
    itls: list[float] = field(default_factory=list)
    finish_model: float | None = None
    finish_reason: dict[str, object] | None = None
    finished: bool = False
    aborted: bool = False
    event: asyncio.Event = field(default_factory=asyncio.Event)
