"""The real server relaunched with `--disable-radix-cache`: /server_info says so, and a shared-prefix
workload gets no cached tokens (meta_info, Prefill lines and /metrics all agree). One server.

This is the real-server fact behind Pitwall's "relaunch without radix cache drops the hit rate".
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = [pytest.mark.real_sglang, pytest.mark.slow]

REAL_SERVER_FLAGS = ["--disable-radix-cache"]
SHARED = "A shared system prompt is repeated so the radix cache can reuse its tokens. " * 3


def test_server_info_reports_radix_cache_disabled(real_server: Any) -> None:
    info = httpx.get(f"{real_server.base_url}/server_info", timeout=60).json()
    assert info["disable_radix_cache"] is True


def test_shared_prefix_gets_no_cached_tokens_anywhere(real_server: Any) -> None:
    sp = {"max_new_tokens": 2, "temperature": 0, "ignore_eos": True}
    metas = []
    for tail in ("one", "two", "three"):
        r = httpx.post(f"{real_server.base_url}/generate",
                       json={"text": SHARED + tail, "sampling_params": sp}, timeout=120)
        assert r.status_code == 200
        metas.append(r.json()["meta_info"])
    assert [m["cached_tokens"] for m in metas] == [0, 0, 0]
    cached = [int(m.group(1)) for ln in real_server.log_text().splitlines()
              if (m := re.search(r"\] Prefill batch, .*#cached-token: (\d+),", ln))]
    assert cached and set(cached) == {0}
    text = httpx.get(f"{real_server.base_url}/metrics", timeout=60).text
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    prompt = sum(s.value for s in fams["sglang:prompt_tokens"].samples if s.name.endswith("_total"))
    assert prompt >= sum(m["prompt_tokens"] for m in metas)
    # SGLang's multiprocess collector only shows a labelled counter once a child is incremented:
    # with no cache hit ever, sglang:cached_tokens_total is ABSENT (not 0) from /metrics.
    assert "sglang:cached_tokens" not in fams
