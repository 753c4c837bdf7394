"""Retraction: what SGLang's scheduler does when the KV pool cannot hold one more token per request."""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulator import logfmt

if TYPE_CHECKING:
    from simulator.request import SimRequest
    from simulator.scheduler import Scheduler

RETRACT_DECODE_STEPS = 20


def retract(s: Scheduler, need: int) -> None:
    """A decode step that cannot get one slot per request retracts requests (fewest output
    tokens, longest input first) back to the queue front and raises new_token_ratio."""
    old = s.new_token_ratio
    order = sorted(s.running, key=lambda r: (len(r.output_ids), -len(r.input_ids)),
                   reverse=True)
    retracted: list[SimRequest] = []
    before = s.kv.available()
    while order and s.kv.available() < len(order):
        r = order.pop()
        s.kv.release(r)
        r.target = r.input_ids + r.output_ids
        r.num_retractions += 1
        r.queue_start_model = s.model_time
        retracted.append(r)
    s.running = [r for r in s.running if r not in retracted]
    for r in reversed(retracted):
        s.waiting.appendleft(r)
    decoded = sum(len(r.output_ids) for r in s.running)
    total_max = sum(r.max_new_tokens for r in s.running) or 1
    s.new_token_ratio = min((decoded + RETRACT_DECODE_STEPS * len(s.running))
                               / total_max, 1.0)
    s.retracted_total += len(retracted)
    s.last_retracted = len(retracted)
    s.log.log(logfmt.retract_line(retracted=len(retracted),
                                     tokens_gained=s.kv.available() - before,
                                     old_ratio=old, new_ratio=s.new_token_ratio),
                 level="warning", tags=s.cfg.tags)
