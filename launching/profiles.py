"""Launch profiles: one TOML file per profile in profiles/, mirrored into storage with a hash.

File shape (flags without their leading dashes; `true` for a bare switch):

    name = "baseline"
    description = "what this profile is for"
    model_path = "Qwen/Qwen2.5-7B-Instruct"
    entrypoint = "<module>"   # a python -m module, or one of the engine's own (Engine.entrypoints)
    [flags]
    mem-fraction-static = 0.8
    [env]
    NCCL_TIMEOUT = "1800"

The files are the source of truth (git-friendly); storage holds a mirror so launches can name
the exact profile (content_hash = sha256 of the canonical JSON of name, description,
model_path, entrypoint, flags and env — formatting and comments do not change it). Parsing is
pure (`parse_profile(text)`), file and storage I/O are thin wrappers.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w
from sqlalchemy.engine import Engine

from collectors.engines import DEFAULT_ENGINE, ENGINES, get_engine
from storage import repo
from storage.errors import ConfigError
from storage.models import Profile

TOP_KEYS = ("name", "description", "model_path", "entrypoint", "record_requests", "flags", "env")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
#: the default engine's first entrypoint: a profile that names none starts with it
DEFAULT_ENTRYPOINT = get_engine(DEFAULT_ENGINE).entrypoints[0]


def entrypoint_ok(entrypoint: str) -> bool:
    """A Python module name, or an entrypoint of a known engine (one may hold a space)."""
    return bool(MODULE_RE.match(entrypoint)) or any(entrypoint in e.entrypoints for e in ENGINES.values())


def entrypoint_examples() -> str:
    """The default engine's entrypoints, quoted and joined by "or" (for messages and help)."""
    return " or ".join(f'"{e}"' for e in get_engine(DEFAULT_ENGINE).entrypoints)


class ProfileError(ConfigError, ValueError):
    """A profile file is malformed; the message names the file and what to fix."""


@dataclass(frozen=True)
class ProfileSpec:
    name: str
    description: str = ""
    model_path: str = ""
    entrypoint: str = DEFAULT_ENTRYPOINT
    flags: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    source_path: str | None = None
    #: the server writes its own request records (the engine's record_flags) into the data
    #: folder's requests/<server>/, pruned by retention.request_records_days; `pitwall trace cut`
    #: and the Traces page's cut read them
    record_requests: bool = False

    def canonical(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "model_path": self.model_path,
            "entrypoint": self.entrypoint,
            "flags": dict(self.flags),
            "env": dict(self.env),
        }
        if self.record_requests:  # only when on: a profile without it keeps the hash it had
            out["record_requests"] = True
        return out

    @property
    def content_hash(self) -> str:
        blob = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def parse_profile(text: str, *, source: str = "<profile>") -> ProfileSpec:
    """TOML text -> ProfileSpec; ProfileError (one sentence) when the shape is wrong.

    Flag names and values are checked later by validation (the engine's `check_flags`), so a
    profile with an unknown flag still loads, lists and diffs; it just cannot be launched.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{source} is not valid TOML ({exc}); fix the file.") from None
    unknown = [k for k in data if k not in TOP_KEYS]
    if unknown:
        raise ProfileError(
            f"{source}: unknown key {unknown[0]!r}; a profile has {', '.join(TOP_KEYS)} "
            "(launch flags go under [flags])."
        )
    name = data.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ProfileError(
            f"{source}: name is {name!r}; expected letters, digits, '-', '_' or '.', e.g. name = \"baseline\"."
        )
    for key in ("description", "model_path", "entrypoint"):
        if key in data and not isinstance(data[key], str):
            raise ProfileError(f"{source}: {key} is {data[key]!r}; expected a string.")
    record = data.get("record_requests", False)
    if not isinstance(record, bool):
        raise ProfileError(f"{source}: record_requests is {record!r}; expected true or false.")
    model_path = data.get("model_path", "")
    if not model_path:
        raise ProfileError(f"{source}: model_path is missing; e.g. model_path = \"Qwen/Qwen2.5-7B-Instruct\".")
    entrypoint = data.get("entrypoint", DEFAULT_ENTRYPOINT)
    if not entrypoint_ok(entrypoint):
        raise ProfileError(
            f"{source}: entrypoint is {entrypoint!r}; expected a Python module such as {entrypoint_examples()}."
        )
    flags = data.get("flags", {})
    env = data.get("env", {})
    if not isinstance(flags, dict):
        raise ProfileError(f"{source}: flags must be a table: [flags] then one `name = value` per line.")
    if not isinstance(env, dict):
        raise ProfileError(f"{source}: env must be a table: [env] then one `NAME = \"value\"` per line.")
    env_out: dict[str, Any] = {}
    for k, v in env.items():
        # Numbers are written as strings (an env var is text); anything else stays for
        # validation to reject with its own message.
        env_out[str(k)] = str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
    return ProfileSpec(
        name=name,
        description=data.get("description", ""),
        model_path=model_path,
        entrypoint=entrypoint,
        flags=dict(flags),
        env=env_out,
        source_path=None if source.startswith("<") else source,
        record_requests=record,
    )


def dump_profile(spec: ProfileSpec) -> str:
    """ProfileSpec -> TOML text (the shape parse_profile reads)."""
    data: dict[str, Any] = {
        "name": spec.name,
        "description": spec.description,
        "model_path": spec.model_path,
        "entrypoint": spec.entrypoint,
        **({"record_requests": True} if spec.record_requests else {}),
        "flags": dict(spec.flags),
        "env": dict(spec.env),
    }
    return tomli_w.dumps(data)


def load_file(path: Path) -> ProfileSpec:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"Cannot read {path}: {exc.strerror}.") from None
    spec = parse_profile(text, source=str(path))
    if spec.name != path.stem:
        raise ProfileError(f"{path}: name {spec.name!r} differs from the file name; rename one so they match.")
    return spec


def candidates_dir(data_dir: Path) -> Path:
    """Profiles Pitwall writes itself (the Doctor's candidates): under the data folder, never the
    source tree's profiles/; listed and mirrored beside profiles_dir's."""
    return Path(data_dir) / "profiles"


def load_dir(folder: Path) -> tuple[list[ProfileSpec], list[str]]:
    """Every *.toml in folder -> (specs, one error sentence per bad file)."""
    specs: list[ProfileSpec] = []
    errors: list[str] = []
    if not folder.is_dir():
        return specs, [f"The profiles folder {folder} does not exist; create it or set PITWALL_PROFILES_DIR."]
    for path in sorted(folder.glob("*.toml")):
        try:
            specs.append(load_file(path))
        except ProfileError as exc:
            errors.append(str(exc))
    return specs, errors


def from_row(row: Profile) -> ProfileSpec:
    return ProfileSpec(
        name=row.name,
        description=row.description,
        model_path=row.model_path,
        entrypoint=row.entrypoint,
        flags=dict(row.flags or {}),
        env=dict(row.env or {}),
        source_path=row.source_path,
        record_requests=bool(row.record_requests),
    )


def mirror(engine: Engine, spec: ProfileSpec) -> Profile:
    """Upsert one profile into storage (unchanged content keeps its hash)."""
    return repo.upsert_profile(
        engine,
        name=spec.name,
        description=spec.description,
        model_path=spec.model_path,
        entrypoint=spec.entrypoint,
        flags=dict(spec.flags),
        env=dict(spec.env),
        record_requests=spec.record_requests,
        source_path=spec.source_path,
        content_hash=spec.content_hash,
    )


def sync_profiles(engine: Engine, folder: Path) -> tuple[list[Profile], list[str]]:
    """Mirror every profile file into storage (runner start, after an edit). Rows whose file
    disappeared are kept: launches reference them and history must stay readable."""
    specs, errors = load_dir(folder)
    return [mirror(engine, s) for s in specs], errors


def resolve(engine: Engine, folder: Path, name_or_path: str) -> ProfileSpec:
    """A profile by file path, by name in the folder, or by name in storage."""
    path = Path(name_or_path)
    if name_or_path.endswith(".toml") or path.is_file():
        if not path.is_file():
            raise ProfileError(f"Profile file {name_or_path} does not exist.")
        return parse_profile(path.read_text(encoding="utf-8"), source=str(path))
    if not NAME_RE.match(name_or_path):
        raise ProfileError(f"{name_or_path!r} is not a profile name or a .toml path.")
    candidate = folder / f"{name_or_path}.toml"
    if candidate.is_file():
        return load_file(candidate)
    row = repo.get_profile(engine, name=name_or_path)
    if row is not None:
        return from_row(row)
    names = sorted({p.stem for p in folder.glob("*.toml")} | {p.name for p in repo.list_profiles(engine)})
    raise ProfileError(
        f"No profile named {name_or_path!r}; known: {', '.join(names) or 'none'} "
        "(`pitwall profiles list`)."
    )


def save(engine: Engine, folder: Path, spec: ProfileSpec) -> Profile:
    """Write profiles/<name>.toml (atomically) and mirror it; returns the stored row."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{spec.name}.toml"
    tmp = path.with_suffix(".toml.tmp")
    tmp.write_text(dump_profile(spec), encoding="utf-8")
    tmp.replace(path)
    spec = ProfileSpec(**{**spec.__dict__, "source_path": str(path)})
    return mirror(engine, spec)


def diff(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """Rows (key, value in a, value in b) where two canonical profiles differ.

    Keys: top-level fields, `flags.<name>` and `env.<NAME>`; a missing value is None.
    """
    rows: list[tuple[str, Any, Any]] = []
    for key in ("model_path", "entrypoint"):
        if a.get(key) != b.get(key):
            rows.append((key, a.get(key), b.get(key)))
    for section in ("flags", "env"):
        sa, sb = a.get(section) or {}, b.get(section) or {}
        for k in sorted(set(sa) | set(sb)):
            if sa.get(k) != sb.get(k):
                rows.append((f"{section}.{k}", sa.get(k), sb.get(k)))
    return rows
