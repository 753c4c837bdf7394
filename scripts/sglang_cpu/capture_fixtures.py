"""Capture golden fixtures from the real SGLang 0.5.23 CPU server (TEST ENVIRONMENT ONLY).

Usage (from the repository root, any Python 3.11; stdlib only):

    python scripts/sglang_cpu/capture_fixtures.py [--out tests/fixtures]

Starts the server built by build_env.sh, sends a fixed traffic script (below), stops it with
SIGTERM and writes tests/fixtures/sglang-0.5.23-real-cpu-*, and the server's `--help` text to
collectors/sglang/sglang-0.5.23-help.txt (the bundled flag table reads it). Every absolute path
of this machine (cache dir, venv, model dir, $HOME, temp dirs) is replaced by a placeholder such
as <VENV> or <MODEL_DIR>; nothing else is stripped. The traffic script and the measured timings are written to
sglang-0.5.23-real-cpu-capture.json so a re-capture can be compared.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_server as rs  # noqa: E402

PREFIX = "sglang-0.5.23-real-cpu"
# The one copy of `--help`, next to the flag module that parses it (collectors/sglang/flags.py).
HELP_OUT = Path(__file__).resolve().parents[2] / "collectors" / "sglang" / "sglang-0.5.23-help.txt"
# A long shared prefix so the second request hits the radix cache (cached-token > 0).
SHARED_PREFIX = (
    "A shared system prompt is repeated so the radix cache can reuse its tokens. "
    "Pitwall watches SGLang inference servers: prefill, decode, cache hits and queues. "
    "The quick brown fox jumps over the lazy dog. Once upon a time there was a tiny model. "
)


def post_json(url: str, body: Mapping[str, object], timeout_s: float = 120.0) -> tuple[int, bytes]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read()


def post_stream(url: str, body: Mapping[str, object], timeout_s: float = 120.0) -> tuple[int, str, bytes]:
    """(status, content-type, raw body bytes) of a streamed response, read to the end."""
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        chunks = []
        while True:
            line = resp.readline()
            if not line:
                break
            chunks.append(line)
        return int(resp.status), str(resp.headers.get("Content-Type")), b"".join(chunks)


class Sanitizer:
    """Replace this machine's absolute paths with placeholders, longest first."""

    def __init__(self, env: dict[str, str], extra: dict[str, str]) -> None:
        pairs = {
            env["VENV"]: "<VENV>",
            env["MODEL"]: "<MODEL_DIR>",
            env["SHIM"]: "<SHIM_DIR>",
            str(Path(env["VENV"]).parent): "<SGLANG_CPU_DIR>",
            sys.base_prefix: "<PYTHON_HOME>",
            os.path.realpath(sys.base_prefix): "<PYTHON_HOME>",
            tempfile.gettempdir(): "<TMP>",
            str(Path.home()): "<HOME>",
            **extra,
        }
        self.pairs = sorted(pairs.items(), key=lambda kv: -len(kv[0]))

    def __call__(self, text: str) -> str:
        for old, new in self.pairs:
            text = text.replace(old, new)
        return text


def pretty(raw: bytes) -> str:
    return json.dumps(json.loads(raw), indent=2) + "\n"


def run_flag_error(env: dict[str, str], flags: list[str]) -> str:
    """stderr + exit code of the real parser rejecting `flags` (argparse exits before any model work)."""
    argv = [env["PYTHON"], "-m", "sglang.launch_server", "--model-path", env["MODEL"], *flags]
    proc = subprocess.run(  # argparse wraps usage to $COLUMNS: fix it for a stable fixture
        argv, capture_output=True, text=True, env={**rs.server_environ(env), "COLUMNS": "100"},
        timeout=300, check=False,
    )
    shown = " ".join(["python -m sglang.launch_server --model-path <MODEL_DIR>", *flags])
    return f"$ {shown}\n# exit code: {proc.returncode}\n# stderr:\n{proc.stderr}# stdout:\n{proc.stdout}"


def watch_health(base: str, t0: float, stop: threading.Event, out: list[str]) -> None:
    """Record each change of GET /health while the server starts (refused -> 503? -> 200)."""
    last = None
    while not stop.is_set():
        try:
            status: object = rs.http_get(base + "/health", timeout_s=5.0)[0]
        except OSError as err:
            status = type(err).__name__
        if status != last:
            out.append(f"t+{time.monotonic() - t0:5.1f} s GET /health during startup -> {status}")
            last = status
        stop.wait(0.25)


def traffic(base: str, rec: dict[str, object]) -> dict[str, bytes | str]:
    """The fixed traffic script; returns raw captures keyed by fixture suffix."""
    out: dict[str, bytes | str] = {}
    health = []
    for path in ("/health", "/health_generate", "/ping", "/ready"):
        status, body = rs.http_get(base + path)
        health.append(f"GET {path} -> HTTP {status}, body {body!r}")
    for path in ("/server_info", "/model_info", "/v1/loads", "/v1/models", "/get_model_info"):
        status, body = rs.http_get(base + path)
        health.append(f"GET {path} -> HTTP {status}, {len(body)} bytes")
        if status == 200:
            out[path.strip("/").replace("/", "_")] = pretty(body)

    gen_body = {"text": "hello world", "sampling_params": {"max_new_tokens": 8, "temperature": 0}}
    status, body = post_json(base + "/generate", gen_body)
    health.append(f"POST /generate -> HTTP {status}")
    out["generate"] = pretty(body)

    stream_body = {
        "text": "hello world",
        "sampling_params": {"max_new_tokens": 6, "temperature": 0, "ignore_eos": True},
        "stream": True,
    }
    status, ctype, raw = post_stream(base + "/generate", stream_body)
    health.append(f"POST /generate stream -> HTTP {status}, Content-Type {ctype}")
    out["generate-stream"] = raw

    # Shared-prefix pair: the second one must report cached tokens > 0.
    cached = []
    for suffix in ("First question: what is the capital of France?", "Second: count to ten."):
        body2 = {"text": SHARED_PREFIX + suffix,
                 "sampling_params": {"max_new_tokens": 4, "temperature": 0, "ignore_eos": True}}
        status, raw = post_json(base + "/generate", body2)
        meta = json.loads(raw)["meta_info"]
        cached.append({"prompt_tokens": meta["prompt_tokens"], "cached_tokens": meta["cached_tokens"]})
    rec["shared_prefix_meta"] = cached

    # Four concurrent streams with 40 new tokens each: Decode lines with #running-req > 1.
    results: list[tuple[int, str, bytes] | BaseException] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        body3 = {"text": f"Tell me a story about a robot number {i}.",
                 "sampling_params": {"max_new_tokens": 40, "temperature": 0, "ignore_eos": True},
                 "stream": True}
        try:
            res: tuple[int, str, bytes] | BaseException = post_stream(base + "/generate", body3)
        except BaseException as err:  # recorded, not raised, so the capture still finishes
            res = err
        with lock:
            results.append(res)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    rec["concurrent_streams"] = [
        r[0] if isinstance(r, tuple) else repr(r) for r in results
    ]

    comp = {"model": "default", "prompt": "hello world", "max_tokens": 5, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}
    status, ctype, raw = post_stream(base + "/v1/completions", comp)
    health.append(f"POST /v1/completions stream -> HTTP {status}, Content-Type {ctype}")
    out["completions-stream"] = raw

    chat = {"model": "default", "messages": [{"role": "user", "content": "hi there"}],
            "max_tokens": 5, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    status, ctype, raw = post_stream(base + "/v1/chat/completions", chat)
    health.append(f"POST /v1/chat/completions stream -> HTTP {status}, Content-Type {ctype}")
    out["chat-stream"] = raw

    status, body = rs.http_get(base + "/metrics")
    health.append(f"GET /metrics -> HTTP {status}, {len(body)} bytes")
    out["metrics"] = body
    out["health"] = "\n".join(health) + "\n"
    rec["requests"] = {
        "generate": gen_body, "generate_stream": stream_body, "completions_stream": comp,
        "chat_stream": chat, "shared_prefix": SHARED_PREFIX,
    }
    return out


SUFFIX_FILES = {
    "generate": "generate.json", "generate-stream": "generate-stream.sse",
    "completions-stream": "completions-stream.sse", "chat-stream": "chat-stream.sse",
    "metrics": "metrics.prom", "health": "health.txt", "server_info": "server_info.json",
    "model_info": "model_info.json", "v1_loads": "v1_loads.json", "v1_models": "v1_models.json",
    "get_model_info": "get_model_info.json",
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("tests/fixtures"))
    ap.add_argument("--skip-flag-errors", action="store_true")
    ap.add_argument("--flags-help-out", type=Path, default=HELP_OUT)
    args = ap.parse_args(argv)
    env = rs.load_env()
    if env is None:
        print("real SGLang env not built; run scripts/sglang_cpu/build_env.sh first.", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="pitwall-capture-"))
    clean = Sanitizer(env, {str(work): "<WORK>"})
    rec: dict[str, object] = {}
    server = rs.RealServer(env=env, log_path=work / "server.log", port=rs.free_port())
    startup_health: list[str] = []
    stop_watch = threading.Event()
    watcher = threading.Thread(
        target=watch_health, args=(server.base_url, time.monotonic(), stop_watch, startup_health)
    )
    watcher.start()
    try:
        server.start()
    finally:
        stop_watch.set()
        watcher.join(timeout=10)
    startup_health.append(f"t+{server.ready_s or 0.0:5.1f} s ready line logged")
    startup_health.sort()  # fixed-width "t+ 12.3 s" prefixes sort by time
    rec["ready_s"] = round(server.ready_s or 0.0, 1)
    rec["argv"] = [clean(a) for a in server.argv()]
    try:
        captures = traffic(server.base_url, rec)
        captures["health"] = "\n".join(startup_health) + "\n" + str(captures["health"])
    finally:
        t0 = time.monotonic()
        rec["exit_code"] = server.stop()
        rec["shutdown_s"] = round(time.monotonic() - t0, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    for key, data in captures.items():
        text = data.decode(errors="replace") if isinstance(data, bytes) else data
        (args.out / f"{PREFIX}-{SUFFIX_FILES[key]}").write_text(clean(text))
    (args.out / f"{PREFIX}.log").write_text(clean(server.log_text()))
    if not args.skip_flag_errors:
        for name, flags in (("enable-radix-cache", ["--enable-radix-cache"]),
                            ("cuda-graph-max-bs", ["--cuda-graph-max-bs", "64"])):
            (args.out / f"{PREFIX}-bad-flag-{name}.txt").write_text(clean(run_flag_error(env, flags)))
        help_env = {**rs.server_environ(env), "COLUMNS": "100"}  # argparse wraps to $COLUMNS
        proc = subprocess.run([env["PYTHON"], "-m", "sglang.launch_server", "--help"],
                              capture_output=True, text=True, env=help_env,
                              timeout=300, check=False)
        args.flags_help_out.write_text(clean(proc.stdout))
    (args.out / f"{PREFIX}-capture.json").write_text(json.dumps(rec, indent=2) + "\n")
    print(json.dumps(rec, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
