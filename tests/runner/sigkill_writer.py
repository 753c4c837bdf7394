"""Helper process for test_sigkill: a real Runner writing samples as fast as it can.

Prints `committed N` after every flush (N = rows committed so far), so the parent knows a lower
bound of what must survive a SIGKILL.
"""

from __future__ import annotations

import sys
import threading
import time

from collectors.base import PollResult, SampleRow
from runner.loop import Runner
from storage.db import make_engine


class Firehose:
    name = "firehose"
    interval_s = 0.0

    def __init__(self) -> None:
        self.seq = 0

    def poll(self, ctx):  # type: ignore[no-untyped-def]
        out = PollResult()
        now = time.time()
        for _ in range(500):
            self.seq += 1
            out.samples.append(SampleRow(now, 1, "firehose.seq", float(self.seq), "log"))
        return out

    def close(self) -> None:
        pass


def main() -> None:
    engine = make_engine(sys.argv[1])
    runner = Runner(engine, [Firehose()], tick_s=0.01, flush_s=0.02, flush_rows=1000)
    original = runner.flush

    def flush() -> int:
        n = original()
        if n:
            print(f"committed {runner.rows_written}", flush=True)
        return n

    runner.flush = flush  # type: ignore[method-assign]
    t = threading.Thread(target=runner.run, daemon=True)
    t.start()
    t.join(60)


if __name__ == "__main__":
    main()
