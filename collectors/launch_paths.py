"""The path, model-reference and port judgements of every engine's launch sandbox (each engine's
sandbox.py holds its own deny table and calls these), pure but for resolving paths.

System folders (SYSTEM_DIRS, plus `~/.ssh`, `~/.gnupg`, `~/.aws`, `~/.kube`, `~/.docker`) are
refused as or under a path; a relative path may not climb out of the server's working folder
with `..`; a written path must resolve (symlinks and `..` followed) inside Pitwall's data folder;
a port may not be one Pitwall holds, the server's own, or another flag's. Cross-check a refusal
with `pitwall profiles validate NAME`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection
from pathlib import Path
from typing import Any

from collectors.base import Issue

HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# not /root: it is the home of a runner started as root, whose ~/.cache holds its models; its
# secret folders are refused as every home's are (HOME_SECRETS)
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
    """A URL or `scheme:...` (a Windows drive letter `C:\\` is not one)."""
    return "://" in value or bool(_SCHEME.match(value)) and not re.match(r"^[A-Za-z]:[\\/]", value)


def climbs(value: str) -> bool:
    """A relative path that uses '..' (it would leave the server's working folder)."""
    return not value.startswith(("/", "~")) and ".." in Path(value).parts


def _climb_issue(key: str, value: str) -> Issue:
    return Issue("error", key, f"{key} = {value!r} climbs out of the server's working folder with '..'; write the absolute path.")


def check_model_ref(key: str, value: str, base: Path | None, what: str = "model") -> Issue | None:
    """A model id `org/name`, or a local folder or file that is not a system folder."""
    if climbs(value):
        return _climb_issue(key, value)
    if looks_remote(value):
        return Issue("error", key, f"{key} = {value!r} is a URL; use a model id like Qwen/Qwen2.5-7B-Instruct or a local folder ({allow_hint(key)}).")
    looks_local = value.startswith(("/", ".", "~")) or not HF_ID.match(value)
    if not looks_local and not os.path.exists(resolve(value, base)):
        return None
    where = system_path(resolve(value, base))
    if where is not None:
        return Issue("error", key, f"{key} = {value!r} is inside the system folder {where}; point it at a {what} folder elsewhere ({allow_hint(key)}).")
    return None


def check_read_path(key: str, value: str, base: Path | None, *, at_file: bool = False) -> Issue | None:
    """A local file outside the system folders; inline JSON and a built-in name (no '/') pass.
    at_file: the engine reads `@PATH` as the file PATH (its '@' is dropped before judging)."""
    if value.lstrip().startswith(("{", "[")):
        return None  # inline JSON (watermark-config, deepep-config)
    if looks_remote(value):
        return Issue("error", key, f"{key} = {value!r} is a URL; give a local file ({allow_hint(key)}).")
    path = value.lstrip("@") if at_file else value
    if climbs(path):
        return _climb_issue(key, value)
    if "/" not in value and not value.startswith(("~", ".")):
        return None  # a built-in name (chat-template = "chatml")
    where = system_path(resolve(path, base))
    if where is not None:
        return Issue("error", key, f"{key} = {value!r} is inside the system folder {where}; use a file elsewhere ({allow_hint(key)}).")
    return None


def check_write_path(key: str, value: str, base: Path | None, data_dir: Path | None) -> Issue | None:
    """A folder or file that resolves inside Pitwall's data folder."""
    if data_dir is None:
        return Issue("error", key, f"{key} writes files, and Pitwall's data folder is unknown here; leave it out ({allow_hint(key)}).")
    root = Path(os.path.realpath(data_dir))
    target = resolve(value, base)
    if target != root and root not in target.parents:
        return Issue("error", key, f"{key} = {value!r} writes outside Pitwall's data folder {root}; use a folder inside it ({allow_hint(key)}).")
    return None


def values(value: Any) -> list[str]:
    """The scalar items of a TOML value (one, or a list's), as text; booleans and tables left out."""
    items = value if isinstance(value, list) else [value]
    return [str(v) for v in items if isinstance(v, str | int | float) and not isinstance(v, bool)]


def named_path(item: str, json_key: str, bare: tuple[str, ...] = ()) -> str:
    """The path one `NAME=PATH` item names (a LoRA adapter's), or a JSON object's `json_key`; an
    item starting with one of `bare` is a path as written."""
    if item.lstrip().startswith("{"):
        try:
            return str(json.loads(item).get(json_key, ""))
        except (ValueError, AttributeError):
            return item
    return item.split("=", 1)[1] if "=" in item and not (bare and item.startswith(bare)) else item


def check_items(key: str, kind: str, items: list[str], *, base: Path | None, data_dir: Path | None,
                at_file: bool = False) -> list[Issue]:
    """The first item of a model, read or write rule's value that breaks it (one issue a key)."""
    for item in items:
        if kind == "model":
            issue = check_model_ref(key, item, base)
        elif kind == "read":
            issue = check_read_path(key, item, base, at_file=at_file)
        else:
            issue = check_write_path(key, item, base, data_dir)
        if issue is not None:
            return [issue]
    return []


def port_values(key: str, value: Any, own_port: int | None, addr_keys: Collection[str] = ()) -> list[int] | str:
    """The ports a port flag or variable names, or the sentence saying why it is not a port.
    `+N` is the server's port + N; a key of `addr_keys` is `host:port` (its port is judged)."""
    ports: list[int] = []
    for item in values(value):
        text = item.strip()
        if key in addr_keys:
            text = text.rsplit(":", 1)[-1] if ":" in text else ""
        if text.startswith("+") and text[1:].isdigit():
            if own_port is None:
                continue  # relative to the server's port, which is not known here
            text = str(own_port + int(text[1:]))
        if not text.isdigit() or not 0 < int(text) < 65536:
            return f"{key} = {item!r} is not a port; give a number from 1 to 65535."
        ports.append(int(text))
    return ports


def check_ports(items: dict[str, Any], *, own_port: int | None, server: str | None,
                reserved: dict[int, tuple[str, str | None]], addr_keys: Collection[str] = ()) -> list[Issue]:
    """Port flags and variables must not take a port Pitwall holds (`reserved`: port -> (what,
    owning server or None)), the server's own port, or one another's."""
    seen: dict[int, str] = {}
    out: list[Issue] = []
    for key, value in items.items():
        got = port_values(key, value, own_port, addr_keys)
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
