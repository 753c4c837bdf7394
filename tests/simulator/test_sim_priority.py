"""Priority scheduling in the simulator as SGLang 0.5.23 does it (--enable-priority-scheduling):
higher priority values are admitted first, every scheduler and tokenizer family gains a
`priority` label, and the queue gauges carry their total under priority="" with one series per
priority beside it (_log_gauge_queue_count); Pitwall reads the total once, not twice, and the
breakdown as metrics.num_queue_reqs_by_priority.<priority>."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
from pwtest import wait_for
from sim_fixture import running_sim

from collectors.base import ServerTarget
from collectors.promtext import parse_metrics
from collectors.sglang.metrics import snapshot
from storage import series_keys as sk

ARGS = ["--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--sim-speed", "2", "--enable-metrics",
        "--enable-priority-scheduling", "--max-running-requests", "1"]


def _gauge(text: str, name: str = "sglang:num_queue_reqs") -> dict[str, float]:
    """priority label -> value of one queue gauge's series."""
    return {s.labels.get("priority", "?"): s.value for s in parse_metrics(text).samples if s.name == name}


def test_higher_priority_goes_first_and_the_queue_is_counted_once(tmp_path: Path) -> None:
    with running_sim(ARGS, tmp_path / "sim.log") as url:
        done: dict[str, float] = {}  # name -> when the server admitted it (its meta_info, model clock)

        def send(name: str, priority: int | None, tokens: int) -> None:
            body = {"text": name, "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True}}
            if priority is not None:
                body["priority"] = priority
            r = httpx.post(f"{url}/generate", json=body, timeout=120)
            r.raise_for_status()
            done[name] = r.json()["meta_info"]["forward_entry_time"]

        def metrics() -> str:
            return httpx.get(f"{url}/metrics", timeout=10).text

        # one long request holds the only running slot (about 20 model seconds) while three wait
        long = threading.Thread(target=send, args=("long", 0, 3000))
        long.start()
        wait_for(lambda: _gauge(metrics(), "sglang:num_running_reqs").get("") == 1, what="the long request running")
        waiters = [threading.Thread(target=send, args=args) for args in
                   (("low-a", 1, 8), ("low-b", 1, 8), ("none", None, 8), ("high", 10, 8))]
        for t in waiters:
            t.start()
        def four_queued() -> str | None:
            text = metrics()
            return text if _gauge(text).get("") == 4 else None

        text = wait_for(four_queued, what="four queued")
        assert _gauge(text) == {"": 4, "1": 2, "None": 1, "10": 1}  # the total, then each priority
        snap = snapshot(ServerTarget(1, "sim", url), parse_metrics(text), None, 1.0)
        values = {r.metric: r.value for r in snap.rows}
        assert values[sk.METRICS_NUM_QUEUE_REQS] == 4  # not 8: the breakdown is not added to it
        assert {k: v for k, v in values.items() if k.startswith("metrics.num_queue_reqs_by_priority.")} == {
            "metrics.num_queue_reqs_by_priority.1": 2, "metrics.num_queue_reqs_by_priority.10": 1,
            "metrics.num_queue_reqs_by_priority.None": 1}
        for t in [long, *waiters]:
            t.join(120)
        after = parse_metrics(metrics())
    # the order the server admitted them in, from its own clock (not the order the client's
    # threads happened to hear back): None ranks below priority 1
    order = sorted(done, key=done.__getitem__)
    assert order[:2] == ["long", "high"] and order[-1] == "none", done
    # tokenizer families carry the request's own priority, "" for the one that set none
    ttft = {s.labels.get("priority") for s in after.samples if s.name == "sglang:time_to_first_token_seconds_count"}
    assert ttft == {"0", "1", "10", ""}, ttft

