"""The path, model-reference and port judgements behind vLLM's launch sandbox (sandbox.py), pure
but for resolving paths. They follow the first engine's sandbox rules word for word (same system
folders, same messages), kept here because an engine folder imports no other engine's.

System folders (SYSTEM_DIRS, plus `~/.ssh`, `~/.gnupg`, `~/.aws`, `~/.kube`, `~/.docker`) are
refused as or under a path; a written path must resolve (symlinks and `..` followed) inside
Pitwall's data folder; a port may not be one Pitwall holds, the server's own, or another flag's.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from collectors.base import Issue

HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# not /root: it is the home of a runner started as root, whose ~/.cache holds its models
SYSTEM_DIRS: tuple[str, ...] = ("/etc", "/proc", "/sys", "/dev", "/boot", "/run", "/var/run",
                                "/bin", "/sbin", "/lib", "/lib64", "/usr/bin", "/usr/sbin", "/usr/lib")
HOME_SECRETS: tuple[str, ...] = (".ssh", ".gnupg", ".aws", ".kube", ".docker")


def allow_hint(key: str) -> str:
    return f'to allow it, add "{key}" to launch.allow_unsandboxed in pitwall.toml (never in a profile)'


def resolve(path: str, base: Path | None) -> Path:
    """`path` made absolute against `base` (the server's working folder), `~` expanded, `..` and
    symlinks resolved (the part that does not exist yet is kept as written)."""
    p = Path(os.path.expanduser(path))
    if not p.is_absolute():
        p = (base or Path.cwd()) / p
    return Path(os.path.realpath(p))


def system_path(resolved: Path) -> str | None:
    """The system folder `resolved` is (or lies under), else None."""
    if resolved == Path("/"):
        return "/"
    home = Path(os.path.expanduser("~"))
    for d in (*SYSTEM_DIRS, *(str(home / h) for h in HOME_SECRETS)):
        root = Path(os.path.realpath(d))
        if resolved == root or root in resolved.parents:
            return d
    return None


def looks_remote(value: str) -> bool:
    return "://" in value or bool(_SCHEME.match(value)) and not re.match(r"^[A-Za-z]:[\\/]", value)


def _climbs(value: str) -> bool:
    """A relative path that uses '..' (it would leave the server's working folder)."""
    return not value.startswith(("/", "~")) and ".." in Path(value).parts


def check_model_ref(key: str, value: str, base: Path | None, what: str = "model") -> Issue | None:
    """A model id `org/name`, or a local folder or file that is not a system folder."""
    if _climbs(value):
        return Issue("error", key, f"{key} = {value!r} climbs out of the server's working folder with '..'; write the absolute path.")
    if looks_remote(value):
        return Issue("error", key, f"{key} = {value!r} is a URL; use a model id like Qwen/Qwen2.5-7B-Instruct or a local folder ({allow_hint(key)}).")
    looks_local = value.startswith(("/", ".", "~")) or not HF_ID.match(value)
    if not looks_local and not os.path.exists(resolve(value, base)):
        return None
    where = system_path(resolve(value, base))
    if where is not None:
        return Issue("error", key, f"{key} = {value!r} is inside the system folder {where}; point it at a {what} folder elsewhere ({allow_hint(key)}).")
    return None


def check_read_path(key: str, value: str, base: Path | None) -> Issue | None:
    """A local file outside the system folders; inline JSON and a built-in name (no '/') pass."""
    if value.lstrip().startswith(("{", "[")):
        return None
    if looks_remote(value):
        return Issue("error", key, f"{key} = {value!r} is a URL; give a local file ({allow_hint(key)}).")
    if _climbs(value):
        return Issue("error", key, f"{key} = {value!r} climbs out of the server's working folder with '..'; write the absolute path.")
    if "/" not in value and not value.startswith(("~", ".")):
        return None  # a built-in name (chat-template = "chatml")
    where = system_path(resolve(value, base))
    if where is not None:
        return Issue("error", key, f"{key} = {value!r} is inside the system folder {where}; use a file elsewhere ({allow_hint(key)}).")
    return None


def check_write_path(key: str, value: str, base: Path | None, data_dir: Path | None) -> Issue | None:
    if data_dir is None:
        return Issue("error", key, f"{key} writes files, and Pitwall's data folder is unknown here; leave it out ({allow_hint(key)}).")
    root = Path(os.path.realpath(data_dir))
    target = resolve(value, base)
    if target != root and root not in target.parents:
        return Issue("error", key, f"{key} = {value!r} writes outside Pitwall's data folder {root}; use a folder inside it ({allow_hint(key)}).")
    return None


def values(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return [str(v) for v in items if isinstance(v, str | int | float) and not isinstance(v, bool)]


def port_values(key: str, value: Any, own_port: int | None) -> list[int] | str:
    """The ports a port flag or variable names, or the sentence saying why it is not a port."""
    ports: list[int] = []
    for item in values(value):
        text = item.strip()
        if text.startswith("+") and text[1:].isdigit():
            if own_port is None:
                continue  # relative to the server's port, which is not known here
            text = str(own_port + int(text[1:]))
        if not text.isdigit() or not 0 < int(text) < 65536:
            return f"{key} = {item!r} is not a port; give a number from 1 to 65535."
        ports.append(int(text))
    return ports


def check_ports(items: dict[str, Any], *, own_port: int | None, server: str | None,
                reserved: dict[int, tuple[str, str | None]]) -> list[Issue]:
    """Port flags and variables must not take a port Pitwall holds (`reserved`: port -> (what,
    owning server or None)), the server's own port, or one another's."""
    seen: dict[int, str] = {}
    out: list[Issue] = []
    for key, value in items.items():
        got = port_values(key, value, own_port)
        if isinstance(got, str):
            out.append(Issue("error", key, got))
            continue
        for port in got:
            what, owner = reserved.get(port, (None, None))
            if port == own_port:
                what, owner = "the server's own HTTP port", None
            if what is not None and (owner is None or owner != server):
                out.append(Issue("error", key, f"{key} = {port} collides with {what}; pick a port nothing in Pitwall uses."))
            elif port in seen:
                out.append(Issue("error", key, f"{key} = {port} is also given to {seen[port]}; give each its own port."))
            seen.setdefault(port, key)
    return out
