"""The canary: one short request per server every `interval_s` (default 30 s), so the dashboard has
client-side latency history between sweeps.

LLM servers get a streaming `/generate` (8 new tokens, temperature 0, fixed prompt); image
servers a tiny `/v1/images/generations` (64x64, 1 step). One request at a time with httpx (poll()
runs in a worker thread, and one stream is far below httpx's limits: its pool degrades only past ~16 streams in flight); the
stream is parsed by the probe's pure `StreamParser`, so TTFT means the same as in sweeps.

| key | unit | meaning | cross-check |
|---|---|---|---|
| canary.ttft_s | s | request start -> first non-empty text chunk (LLM only) | `pitwall probe --url URL --concurrency 1 --requests 5 --max-new-tokens 8` |
| canary.e2e_s | s | request start -> response fully read (image servers: the image latency) | same, e2e p50 |
| canary.ok | 1/0 | 1 when the request succeeded, 0 otherwise | `curl -N URL/generate -d '{"text":"hi","stream":true}'` |

A disaggregated service's prefill and decode servers are not probed: they answer only requests
their router pairs; the router carries the service's canary.

Source `probe`. A failed request also emits one `probe_error` event (severity warning) naming the
error kind (timeout, connect_refused, http_<code>, stream_broken, invalid_response, too_large).
`timeout_s` is the total deadline of one request (connect + every read); the body is capped by
`collectors.http.BODY_CAPS`.
"""

from __future__ import annotations

import json
import time

import httpx

from collectors.base import CollectorContext, EventRow, PollResult, SampleRow, ServerTarget
from collectors.fanout import ServerPool
from collectors.http import CapExceeded, DeadlineExceeded, auth_headers, capped_client, get_capped
from collectors.probe.sse import (
    InvalidResponse,
    ServerStreamError,
    StreamParser,
    parse_image_response,
)
from storage import series_keys as sk

WAIT_S = 2.0  # a poll waits this long for its servers; a slower request is handed in later
CANARY_PROMPT = "Reply with one short sentence: what is a canary?"
GENERATE_BODY = {
    "text": CANARY_PROMPT,
    "sampling_params": {"max_new_tokens": 8, "temperature": 0.0},
    "stream": True,
}
IMAGE_BODY = {"prompt": "a small red square", "n": 1, "size": "64x64", "num_inference_steps": 1,
              "response_format": "b64_json"}


def canary_once(client: httpx.Client, target: ServerTarget, timeout_s: float) -> dict[str, object]:
    """One canary request: {"ok", "ttft_s", "e2e_s", "error_kind", "detail"} (seconds)."""
    base = target.base_url.rstrip("/")
    headers = auth_headers(target.api_key)
    out: dict[str, object] = {"ok": False, "ttft_s": None, "e2e_s": None, "error_kind": None, "detail": ""}
    t0 = time.perf_counter()
    try:
        if target.kind == "image":
            resp = get_capped(client, base + "/v1/images/generations", method="POST",
                              json_body=IMAGE_BODY, headers=headers, deadline_s=timeout_s)
            if resp.status_code >= 300:
                out["error_kind"] = f"http_{resp.status_code}"
            else:
                parse_image_response(resp.json())
        else:
            parser = StreamParser("generate")
            lines = _Lines()

            def on_chunk(chunk: bytes) -> None:
                for line in lines.feed(chunk):
                    parser.feed(line)
                if out["ttft_s"] is None and parser.visible:
                    out["ttft_s"] = time.perf_counter() - t0

            resp = get_capped(client, base + "/generate", method="POST", json_body=GENERATE_BODY,
                              headers=headers, deadline_s=timeout_s, on_chunk=on_chunk)
            if resp.status_code >= 300:
                out["error_kind"] = f"http_{resp.status_code}"
            else:
                for line in lines.flush():
                    parser.feed(line)
                if not parser.done:
                    out["error_kind"], out["detail"] = "stream_broken", "stream ended without [DONE]"
    except DeadlineExceeded as exc:
        out["error_kind"], out["detail"] = "timeout", str(exc)
    except CapExceeded as exc:
        out["error_kind"], out["detail"] = "too_large", str(exc)
    except httpx.ConnectError as exc:
        out["error_kind"], out["detail"] = "connect_refused", str(exc)
    except httpx.TimeoutException:
        out["error_kind"], out["detail"] = "timeout", f"no complete answer within {timeout_s:g} s"
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
        out["error_kind"], out["detail"] = "stream_broken", str(exc)
    except (InvalidResponse, json.JSONDecodeError, ValueError) as exc:
        out["error_kind"], out["detail"] = "invalid_response", str(exc)
    except ServerStreamError as exc:
        out["error_kind"], out["detail"] = exc.kind, str(exc)
    except httpx.HTTPError as exc:
        out["error_kind"], out["detail"] = "stream_broken", f"{type(exc).__name__}: {exc}"
    out["e2e_s"] = time.perf_counter() - t0
    out["ok"] = out["error_kind"] is None
    return out


class _Lines:
    """Splits a byte stream into text lines as chunks arrive (linear: each byte is scanned once)."""

    def __init__(self) -> None:
        self._rest = bytearray()

    def feed(self, chunk: bytes) -> list[str]:
        if b"\n" not in chunk:
            self._rest += chunk
            return []
        self._rest += chunk
        *done, rest = bytes(self._rest).split(b"\n")
        self._rest = bytearray(rest)
        return [ln.rstrip(b"\r").decode("utf-8", errors="replace") for ln in done]

    def flush(self) -> list[str]:
        rest, self._rest = bytes(self._rest), bytearray()
        return [rest.rstrip(b"\r").decode("utf-8", errors="replace")] if rest else []


class CanaryCollector:
    """Collector "canary": one short request per server per interval."""

    name = "canary"

    def __init__(self, interval_s: float = 30.0, timeout_s: float = 20.0) -> None:
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self._client = capped_client(timeout_s)
        self._servers = ServerPool(self.name)

    def poll(self, ctx: CollectorContext) -> PollResult:
        """Every serving server at once (collectors/fanout.py); a request still running after
        WAIT_S is handed in by a later poll (it has its own deadline, timeout_s)."""
        # a managed server that is starting or stopped: nothing to measure
        # a disaggregated service's prefill or decode server answers only requests its router
        # pairs (a bootstrap room): the service's canary goes through the router
        servers = [t for t in ctx.servers if t.serving and t.role not in ("prefill", "decode")]
        fan = self._servers.poll_servers(ctx, servers, self._poll_one, wait_s=WAIT_S)
        for target, exc in fan.failed:  # canary_once catches what a request can raise: a bug
            fan.result.events.append(EventRow(
                ctx.now(), target.id, "collector_error",
                f"The canary of {target.name!r} failed ({type(exc).__name__}: {exc}).",
                launch_id=target.launch_id,
            ))
        return fan.result

    def _poll_one(self, ctx: CollectorContext, target: ServerTarget) -> PollResult:
        out = PollResult()
        res = canary_once(self._client, target, self.timeout_s)
        ts = ctx.now()
        for metric, key in (("ttft_s", sk.CANARY_TTFT_S), ("e2e_s", sk.CANARY_E2E_S)):
            value = res[metric]
            if isinstance(value, float) and (metric != "e2e_s" or res["ok"]):
                out.samples.append(SampleRow(ts, target.id, key, value, "probe", target.launch_id))
        out.samples.append(SampleRow(ts, target.id, sk.CANARY_OK, 1.0 if res["ok"] else 0.0, "probe", target.launch_id))
        if not res["ok"]:
            out.events.append(EventRow(
                ts, target.id, "probe_error",
                f"Canary request to {target.name} failed: {res['error_kind']}.",
                raw=str(res["detail"])[:500], launch_id=target.launch_id,
            ))
        return out

    def close(self) -> None:
        self._servers.close()
        self._client.close()
