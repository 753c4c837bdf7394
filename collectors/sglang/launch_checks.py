"""SGLang's launch checks behind the Engine (`check_options`, `check_profile`, `deny_reason`),
called by the launch sandbox (launching/sandbox.py): the option values and shapes SGLang
needs before its deny table is read, the deny table itself (sandbox.py here), and why a rule
exists, for the Profiles page's list of what pitwall.toml lifts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collectors.base import Issue
from collectors.flagtable import model_path_option_issue
from collectors.sglang import flags as sglang_flags
from collectors.sglang import sandbox as sglang_sandbox


def check_options(entrypoint: str, model_path: str, flags: dict[str, Any]) -> list[Issue]:
    """The entrypoint a diffusion profile needs, a model_path SGLang would read as an option,
    and option values (flags.py `check_option_values`)."""
    issues: list[Issue] = []
    if sglang_flags.is_diffusion(flags) and entrypoint == "sglang.launch_server":
        issues.append(Issue("error", "model-type", "model-type = \"diffusion\" needs entrypoint \"sglang serve\" (sglang.launch_server starts only the LLM server)."))
    issues.extend(_router_checks(entrypoint, flags))
    issues.extend(model_path_option_issue(model_path, "SGLang"))
    issues.extend(sglang_flags.check_option_values(flags))
    return issues


def _router_checks(entrypoint: str, flags: dict[str, Any]) -> list[Issue]:
    """A router profile runs the router and names its workers by http(s) URL; a router
    entrypoint needs a router profile."""
    from collectors.sglang.launch import ROUTER_ENTRYPOINTS

    if not sglang_flags.is_router(flags):
        if entrypoint in ROUTER_ENTRYPOINTS:
            return [Issue("error", "entrypoint", f"entrypoint {entrypoint} starts the router: name its workers in [flags] "
                          "(worker-urls, or pd-disaggregation with prefill and decode).")]
        return []
    issues: list[Issue] = []
    if flags.get("api-key") not in (None, False):  # a server's goes into its 0600 config file; the router has none
        issues.append(Issue("error", "api-key", "api-key cannot be set in a router profile: sglang-router takes the key "
                            "it sends its workers only on its command line, which every user of the host can read "
                            "(ps). Pitwall cannot start such a router; run its workers without --api-key on a "
                            "private network, or start the router yourself and watch it (managed = false)."))
    if entrypoint not in ROUTER_ENTRYPOINTS:
        issues.append(Issue("error", "entrypoint", f"[flags] name router workers; the router's entrypoint is "
                            f"\"{ROUTER_ENTRYPOINTS[0]}\" (this profile says {entrypoint!r})."))
    for key in ("worker-urls", "prefill", "decode"):
        value = flags.get(key)
        for entry in value if isinstance(value, list) else [] if value is None else [value]:
            url, _, port = str(entry).strip().partition(" ")
            port = port.strip()
            if not url.startswith(("http://", "https://")) or any(c in url for c in " \t'\"`$;|&<>"):
                issues.append(Issue("error", key, f"{key} = {entry!r}: a worker is an http(s) URL such as http://127.0.0.1:30000."))
            elif port and (key != "prefill" or not (port.isdigit() or port == "none")):
                issues.append(Issue("error", key, f"{key} = {entry!r}: only a prefill worker takes a bootstrap port "
                                    "after its URL, a number (\"http://10.0.0.5:30000 8998\")."))
    if flags.get("pd-disaggregation") and not (flags.get("prefill") and flags.get("decode")):
        issues.append(Issue("error", "pd-disaggregation", "pd-disaggregation needs a prefill and a decode worker (prefill = \"http://...\", decode = \"http://...\")."))
    return issues


def check_router(flags: dict[str, Any], metrics_url: str | None) -> list[Issue]:
    """The router's metrics port (--prometheus-port, 29000 unless set) is the one the server's
    metrics_url names; its metrics address (--prometheus-host, 0.0.0.0 unless set) is loopback or
    said to be every interface."""
    from urllib.parse import urlsplit

    issues: list[Issue] = []
    port = flags.get("prometheus-port", 29000)
    if isinstance(port, bool) or not isinstance(port, int) and not str(port).isdigit():
        return [Issue("error", "prometheus-port", f"prometheus-port is {port!r}; expected a port number, e.g. 29000.")]
    port = int(port)
    want = urlsplit(metrics_url).port if metrics_url else None
    if metrics_url and want is None:
        issues.append(Issue("error", "prometheus-port", f"the server's metrics_url {metrics_url} names no port; write "
                            f"the router's metrics port in it, e.g. http://127.0.0.1:{port}/metrics."))
        metrics_url = None  # said; the checks below need a port
    if not metrics_url and not issues:
        issues.append(Issue("error", "prometheus-port", "a router server needs metrics_url in pitwall.toml (its metrics "
                            f"are on their own port, {port} here): e.g. metrics_url = \"http://127.0.0.1:{port}/metrics\"."))
    elif metrics_url and want != port:
        issues.append(Issue("error", "prometheus-port", f"the router would serve its metrics on port {port}, but the "
                            f"server's metrics_url reads {metrics_url}: set prometheus-port = {want} "
                            "(or change metrics_url)."))
    if str(flags.get("prometheus-host", "0.0.0.0")) in ("0.0.0.0", "::"):
        issues.append(Issue("warning", "prometheus-host", "the router's metrics listen on every interface (its default "
                            "0.0.0.0); set prometheus-host = \"127.0.0.1\" unless another host scrapes them."))
    return issues


def check_profile(model_path: str, flags: dict[str, Any], env: dict[str, Any], *,
                  allowed: frozenset[str] = frozenset(), data_dir: Path | None = None,
                  reserved_ports: dict[int, tuple[str, str | None]] | None = None,
                  server: str | None = None, own_port: int | None = None) -> list[Issue]:
    """The deny table over a profile (sandbox.py `check_profile`)."""
    ctx = sglang_sandbox.Context(allowed=allowed, data_dir=data_dir, reserved_ports=reserved_ports,
                                 server=server, own_port=own_port)
    return sglang_sandbox.check_profile(model_path, flags, env, ctx)


def deny_reason(name: str) -> str | None:
    """Why the deny table refuses the flag or variable `name`; None when it has no rule for it."""
    rule = sglang_sandbox.DENY_FLAGS.get(name) or sglang_sandbox.DENY_ENV.get(name)
    return rule.reason if rule else None
