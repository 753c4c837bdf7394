"""Tune runs for the CLI and the dashboard: request one, follow it, score, show it.

The search itself runs in the runner (runner/tunes.py, the `tune` lane); this module only
records the request (an Intent plus an Audit row) and reads tune intents back; the runner's
scorer (a probe run's scorecard cut down to the ranking's dimensions) is scorecard/scorer.py.

Candidates match the server's kind: a profile whose flags start an image-generation server (the
engine's `profile_kind`) is an image profile, any other an LLM profile; a tune of an
LLM server refuses image profiles and the other way round (`profile_kind`, `start_tune`).

The default workload (`default_workload`) is the server's own newest finished sweep (its
ProbeRun spec, without what each candidate sets itself), so a tune measures what the operator
measured; with no sweep yet, LLM servers get `shared-prefix` prompts (templates shared by
several prompts: a difference the radix cache makes shows up) and image servers the probe's
image defaults.

Grid candidates (`--grid 'flag=v1,v2;flag2=v3'`) are profiles derived from the server's own
profile, one per combination, written to the profiles folder as `<base>-tune-<flag>-<value>...`
(data like any profile: the same validation applies when the runner relaunches under them).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from present.format import request_label
from present.tune_result import verdict, winner
from runner import tune_rank
from storage import repo
from storage.errors import RequestError
from storage.models import Intent

GRID_MAX = 16


class TuneRequestError(RequestError, ValueError):
    """A tune request that cannot be carried out; the message says what to change."""


def sweep_fragment(spec: dict[str, Any]) -> dict[str, Any]:
    """A SweepSpec dict without what each candidate sets itself (url, server, launch, key)."""
    out = dict(spec)
    for key in ("url", "api_key", "server_id", "launch_id", "name", "baseline_run_id"):
        out.pop(key, None)
    return out


def trace_names(engine: Engine) -> list[str]:
    """The stored traces a tune can rank on, newest first."""
    return [t.name for t in repo.list_traces(engine)]


def trace_workload(engine: Engine, slo_table: dict[str, Any], *, server: str, trace: str,
                   window: tuple[float | None, float | None] = (None, None), max_requests: int | None = None,
                   max_speed: float = 1024.0) -> dict[str, Any]:
    """A tune's workload that is a stored trace (`pitwall tune --trace`, the Tune page): the trace
    with its digest pinned, the window and caps, and the server's SLO targets (`slo_table`: the
    settings' [slo]; the page's edits are read here) that each candidate's capacity search holds
    to (runner/tunes.py). TuneRequestError with what to change."""
    from scorecard.slo import load_overrides, resolve

    stored = repo.get_trace(engine, name=trace)
    if stored is None:
        names = ", ".join(t.name for t in repo.list_traces(engine)) or "none"
        raise TuneRequestError(f"No trace named {trace!r}; stored: {names}. `pitwall trace import FILE` stores one.")
    if max_requests is not None and max_requests <= 0:
        raise TuneRequestError("Max requests must be positive (or left out: every request of the window).")
    if not max_speed > 0:
        raise TuneRequestError("The fastest speed tried must be above 0.")
    targets = {k: t.target for k, t in resolve(server, slo_table, load_overrides(engine)).targets.items()}
    slo = {k: float(v) for k, v in targets.items() if k in ("ttft_p99_s", "itl_p99_s", "image_p99_s", "success_rate")}
    if not slo:
        raise TuneRequestError(f"A trace tune ranks on the speed within the SLO, and [slo] sets none of ttft_p99_s, "
                               f"itl_p99_s, image_p99_s, success_rate for {server}.")
    return {"trace": stored.name, "digest": stored.digest, "speed": "auto", "window": list(window),
            "max_requests": max_requests, "max_speed": float(max_speed), "slo": slo, "mode": "rate",
            "workload": {"prompt_set": f"trace {stored.name}, the speed within the SLO"}}


def profile_kind(flags: dict[str, Any] | None) -> str:
    """'image' for an image-generation profile (the engine's `profile_kind`), else 'llm' (Server.kind's words)."""
    from collectors.engines import DEFAULT_ENGINE, get_engine

    return get_engine(DEFAULT_ENGINE).profile_kind(flags or {})


def profile_names(engine: Engine, *, kind: str | None = None) -> list[str]:
    """Profile names, only those of `kind` ('llm' | 'image') when given."""
    return sorted(p.name for p in repo.list_profiles(engine) if kind is None or profile_kind(p.flags) == kind)


def server_kind(engine: Engine, server: str) -> str:
    srv = repo.get_server(engine, name=server)
    return srv.kind if srv is not None else "llm"


#: the workload of a tune when the server has no finished sweep (see the module docstring)
FALLBACK_SWEEPS: dict[str, dict[str, Any]] = {
    "llm": {"api": "generate", "mode": "concurrency", "levels": [1.0, 4.0], "requests": 40,
            "workload": {"prompt_set": "shared-prefix", "max_new_tokens": 128}},
    "image": {"api": "images", "mode": "concurrency", "levels": [1.0, 2.0], "requests": 12,
              "workload": {"prompt_set": "builtin", "image_size": "1024x1024"}},
}


@dataclass(frozen=True)
class DefaultWorkload:
    sweep: dict[str, Any]  # a sweep_fragment
    run_id: int | None  # the ProbeRun it comes from; None for the fallback
    text: str  # "workload: the last sweep of demo, run #12"


def default_workload(engine: Engine, server: str) -> DefaultWorkload:
    """The server's newest finished sweep's workload, else FALLBACK_SWEEPS for its kind."""
    srv = repo.get_server(engine, name=server)
    if srv is not None and srv.id is not None:
        for run in repo.list_probe_runs(engine, server_id=srv.id, limit=50):
            if run.status == "done" and run.spec:
                return DefaultWorkload(sweep_fragment(run.spec), run.id,
                                       f"workload: the last sweep of {server}, run #{run.id}")
    kind = srv.kind if srv is not None else "llm"
    why = ("shared-prefix prompts, so the radix cache's effect can show" if kind == "llm"
           else "the probe's image defaults")
    return DefaultWorkload(dict(FALLBACK_SWEEPS.get(kind, FALLBACK_SWEEPS["llm"])), None,
                           f"workload: {why} (no finished sweep of {server} yet)")


def check_candidates(engine: Engine, *, server: str, profiles: list[str]) -> list[str]:
    """The candidate names to tune `server` with, checked: a configured managed server, known
    profiles named once each, of the server's kind. Raises TuneRequestError saying what to change."""
    srv = repo.get_server(engine, name=server)
    if srv is None or srv.id is None:
        raise TuneRequestError(f"Server {server!r} is not configured; pick one of the configured servers.")
    if not srv.managed:
        raise TuneRequestError(f"Server {server!r} is not managed by Pitwall (managed = false): "
                               "a tune relaunches it, so it must be managed.")
    names = [p.strip() for p in profiles if p.strip()]
    if not names:
        raise TuneRequestError("Name at least one candidate profile (--profiles A,B or --grid).")
    if len(set(names)) != len(names):
        raise TuneRequestError(f"A profile is named twice in {names}; name each candidate once.")
    unknown = [n for n in names if repo.get_profile(engine, name=n) is None]
    if unknown:
        known = ", ".join(sorted(p.name for p in repo.list_profiles(engine)))
        raise TuneRequestError(f"Unknown profile(s) {unknown}; known: {known}.")
    kind = srv.kind or "llm"
    wrong = [n for n in names if profile_kind(getattr(repo.get_profile(engine, name=n), "flags", None)) != kind]
    if wrong:
        fit = ", ".join(profile_names(engine, kind=kind)) or "none yet"
        article = "an image" if kind == "image" else "an LLM"
        raise TuneRequestError(
            f"{', '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} not {article} profile, and {server} is "
            f"{article} server; pick candidates of its kind ({fit}).")
    return names


def start_tune(engine: Engine, *, server: str, profiles: list[str], sweep: dict[str, Any], apply: bool = False,
               requested_by: str = "cli") -> Intent:
    """Record a pending `tune` intent (and a `tune_start` audit row) for the runner."""
    names = check_candidates(engine, server=server, profiles=profiles)
    srv = repo.get_server(engine, name=server)
    assert srv is not None
    open_tunes = repo.list_intents(engine, server_id=srv.id, kinds=("tune",), states=("pending", "running"), limit=1)
    if open_tunes:
        raise TuneRequestError(f"{request_label(open_tunes[0].id, 'tune', start=True)} of {server} is still {open_tunes[0].state}; "
                               "wait for it or stop it first.")
    intent = repo.create_intent(engine, kind="tune", server_id=srv.id, requested_by=requested_by,
                                payload={"server": server, "profiles": names, "sweep": sweep_fragment(sweep),
                                         "apply": bool(apply)})
    repo.add_audit(engine, actor=requested_by, action="tune_start", target=server,
                   detail={"intent_id": intent.id, "profiles": names, "apply": bool(apply)})
    return intent


def stop_tune(engine: Engine, intent_id: int, *, actor: str) -> bool:
    from runner.tunes import request_stop

    ok = request_stop(engine, intent_id)
    if ok:
        repo.add_audit(engine, actor=actor, action="tune_stop", target=request_label(intent_id, "tune"))
    return ok


def list_tunes(engine: Engine, *, server: str | None = None, limit: int = 20) -> list[Intent]:
    sid = None
    if server is not None:
        srv = repo.get_server(engine, name=server)
        if srv is None:
            return []
        sid = srv.id
    return repo.list_intents(engine, server_id=sid, kinds=("tune",), limit=limit)


def tune_json(intent: Intent) -> dict[str, Any]:
    """The `--json` contract of a tune (runner/tune_rank.py public_json)."""
    return tune_rank.public_json(intent.result or {})


# -- grid candidates ----------------------------------------------------------------------------
_FLAG = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def parse_grid(text: str) -> list[dict[str, str]]:
    """'flag=v1,v2;flag2=v3' -> one {flag: value} dict per combination (GRID_MAX at most)."""
    axes: list[tuple[str, list[str]]] = []
    for part in [p.strip() for p in text.split(";") if p.strip()]:
        flag, sep, values = part.partition("=")
        flag = flag.strip().lstrip("-")
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not _FLAG.match(flag) or not vals:
            raise TuneRequestError(f"Grid part {part!r} is not flag=v1,v2 (e.g. 'max-running-requests=32,64').")
        axes.append((flag, vals))
    if not axes:
        raise TuneRequestError("The grid is empty; write it as 'flag=v1,v2;flag2=v3,v4'.")
    combos = [dict(zip([a[0] for a in axes], vals, strict=True)) for vals in itertools.product(*[a[1] for a in axes])]
    if len(combos) > GRID_MAX:
        raise TuneRequestError(f"The grid makes {len(combos)} candidates; keep it to {GRID_MAX} or fewer.")
    return combos


def _toml_value(value: Any) -> str:
    """A TOML literal: booleans and numbers as such, anything else a quoted string."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return repr(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _grid_value(text: str) -> Any:
    """A grid value as typed: true/false, an int, a float, else the text."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def write_grid_profiles(engine: Engine, profiles_dir: Path, base: str, combos: list[dict[str, str]],
                        *, out_dir: Path | None = None) -> list[str]:
    """Write one profile per grid combination, derived from `base` (in profiles_dir), into out_dir
    (default profiles_dir); returns their names."""
    import tomllib

    from launching.profiles import sync_profiles

    src = Path(profiles_dir) / f"{base}.toml"
    if not src.is_file():
        raise TuneRequestError(f"The base profile {base!r} has no file in {profiles_dir}; pick a file profile.")
    data = tomllib.loads(src.read_text(encoding="utf-8"))
    names = []
    for combo in combos:
        suffix = "-".join(f"{k}-{v}" for k, v in combo.items())
        name = re.sub(r"[^a-z0-9-]+", "-", f"{base}-tune-{suffix}".lower()).strip("-")[:80]
        flags = {**(data.get("flags") or {}), **{k: None for k in combo}}
        lines = [f'name = "{name}"',
                 f'description = "{base} with {", ".join(f"{k}={v}" for k, v in combo.items())} (pitwall tune grid)"']
        lines += [f"{k} = {_toml_value(v)}" for k, v in data.items()
                  if k not in ("name", "description", "flags", "env") and isinstance(v, (str, int, float, bool))]
        lines.append("\n[flags]")
        for k, v in flags.items():
            lines.append(f"{k} = {_toml_value(_grid_value(combo[k]) if k in combo else v)}")
        if data.get("env"):
            lines.append("\n[env]")
            lines += [f"{k} = {_toml_value(str(v))}" for k, v in data["env"].items()]
        target = Path(out_dir or profiles_dir)
        target.mkdir(parents=True, exist_ok=True)
        (target / f"{name}.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
        names.append(name)
    _, errors = sync_profiles(engine, Path(out_dir or profiles_dir))
    if errors:
        raise TuneRequestError(f"A grid profile could not be read: {errors[0]}")
    return names


# -- text ---------------------------------------------------------------------------------------
def _fmt(v: Any, scale: float = 1.0, unit: str = "", digits: int = 0) -> str:
    if not isinstance(v, (int, float)):
        return "-"
    return f"{v * scale:.{digits}f}{unit}"


def format_table(result: dict[str, Any]) -> str:
    """The ranking as a text table (what `pitwall tune` prints at the end)."""
    rows = [("rank", "profile", "status", "goodput req/s", "p99 TTFT", "p99 ITL", "out tok/s", "USD/1M out",
             "errors", "reason")]
    for c in tune_rank.public_json(result)["candidates"]:
        sc = c.get("scorecard") or {}
        lat, tp, cost, st = (sc.get(d) or {} for d in ("latency", "throughput", "cost", "stability"))
        rows.append((str(c.get("rank") or "-"), str(c["profile"]), str(c["status"]), _fmt(c.get("goodput_rps"), digits=2),
                     _fmt(lat.get("ttft_p99_s"), 1000, " ms"), _fmt(lat.get("itl_p99_s"), 1000, " ms", 1),
                     _fmt(tp.get("output_tok_s")), _fmt(cost.get("usd_per_1m_output_tok"), unit="", digits=2),
                     _fmt(st.get("error_count")), str(c.get("reason") or "")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1] for r in rows]
    said = verdict(result)
    out.insert(0, said.text if said is not None else "Not ranked yet.")
    out.append(f"winner: {winner(result) or 'none'} · running now: {result.get('restored_profile') or '?'}")
    return "\n".join(out)


def eta_text(progress: dict[str, Any] | None) -> str:
    p = progress or {}
    eta = p.get("eta_s")
    return f"about {int(eta) // 60} min {int(eta) % 60} s left" if isinstance(eta, (int, float)) else ""


def apply_winner(engine: Engine, intent_id: int, *, actor: str) -> Intent:
    """Relaunch the server under a finished tune's winner (a `relaunch` intent, audited)."""
    from launching import launcher

    tune_intent = repo.get_intent(engine, intent_id=intent_id)
    result = (tune_intent.result if tune_intent is not None else None) or {}
    said = verdict(result)
    best = said.winner if said is not None else None
    if best is None:
        why = said.text if said is not None else "it is not ranked yet."
        raise TuneRequestError(f"{request_label(intent_id, 'tune', start=True)} has no winner to apply: {why}")
    try:
        sub = launcher.request(engine, kind="relaunch", server_name=str(result.get("server")), actor=actor,
                               profile=best)
    except launcher.LauncherError as exc:
        raise TuneRequestError(str(exc)) from None
    repo.add_audit(engine, actor=actor, action="tune_apply", target=str(result.get("server")),
                   detail={"intent_id": intent_id, "profile": best, "relaunch_intent_id": sub.id})
    return sub
