"""SGLang's launch checks behind the Engine (`check_options`, `check_profile`, `deny_reason`),
called by the launch sandbox (launching/sandbox.py): the option values and shapes SGLang
needs before its deny table is read, the deny table itself (sandbox.py here), and why a rule
exists, for the Profiles page's list of what pitwall.toml lifts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collectors.base import Issue
from collectors.sglang import flags as sglang_flags
from collectors.sglang import sandbox as sglang_sandbox


def check_options(entrypoint: str, model_path: str, flags: dict[str, Any]) -> list[Issue]:
    """The entrypoint a diffusion profile needs, a model_path SGLang would read as an option,
    and option values (flags.py `check_option_values`)."""
    issues: list[Issue] = []
    if sglang_flags.is_diffusion(flags) and entrypoint == "sglang.launch_server":
        issues.append(Issue("error", "model-type", "model-type = \"diffusion\" needs entrypoint \"sglang serve\" (sglang.launch_server starts only the LLM server)."))
    if model_path.lstrip().startswith("-"):
        issues.append(Issue("error", "model_path", f"model_path {model_path!r} starts with '-', which SGLang would read as an option; use a model id or a folder."))
    issues.extend(sglang_flags.check_option_values(flags))
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
