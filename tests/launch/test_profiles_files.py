"""Profile files: parsing errors, canonical hash, round trip, mirror into storage, diff, save."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.settings import Settings
from dashboard.services import profile_admin
from launching import profiles
from launching.profiles import ProfileError, ProfileSpec
from storage import repo

REPO = Path(__file__).resolve().parents[2]
GOOD = 'name = "a"\nmodel_path = "org/m"\n[flags]\nmem-fraction-static = 0.8\n[env]\nNCCL_TIMEOUT = 1800\n'


def test_parse_good_profile() -> None:
    spec = profiles.parse_profile(GOOD)
    assert spec.flags == {"mem-fraction-static": 0.8}
    assert spec.env == {"NCCL_TIMEOUT": "1800"}  # numbers become strings: env vars are text
    assert spec.entrypoint == "sglang.launch_server"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name = ", "<profile> is not valid TOML"),
        ('name = "a"\nmodel_path = "m/x"\nmem-fraction-static = 0.8\n', "<profile>: unknown key 'mem-fraction-static'; a profile has name, description, model_path, entrypoint, record_requests, flags, env (launch flags go under [flags])."),
        ('name = "a b"\nmodel_path = "m/x"\n', "<profile>: name is 'a b'; expected letters"),
        ('name = "a"\n', "<profile>: model_path is missing"),
        ('name = "a"\nmodel_path = "m/x"\nentrypoint = "rm -rf /"\n', "<profile>: entrypoint is 'rm -rf /'; expected a Python module"),
        ('name = "a"\nmodel_path = "m/x"\nflags = 3\n', "<profile>: flags must be a table"),
        ('name = "a"\nmodel_path = "m/x"\nenv = "X=1"\n', "<profile>: env must be a table"),
        ('name = "a"\nmodel_path = 7\n', "<profile>: model_path is 7; expected a string."),
    ],
)
def test_parse_errors(text: str, expected: str) -> None:
    with pytest.raises(ProfileError) as info:
        profiles.parse_profile(text)
    assert str(info.value).startswith(expected)


def test_hash_ignores_formatting_and_roundtrips() -> None:
    a = profiles.parse_profile(GOOD)
    b = profiles.parse_profile("# a comment\n" + GOOD.replace(" = ", "="))
    assert a.content_hash == b.content_hash
    assert profiles.parse_profile(profiles.dump_profile(a)).content_hash == a.content_hash
    c = profiles.parse_profile(GOOD.replace("0.8", "0.81"))
    assert c.content_hash != a.content_hash


def test_file_name_must_match(tmp_path: Path) -> None:
    (tmp_path / "b.toml").write_text(GOOD)
    specs, errors = profiles.load_dir(tmp_path)
    assert specs == [] and errors == [f"{tmp_path / 'b.toml'}: name 'a' differs from the file name; rename one so they match."]


def test_shipped_profiles_are_valid() -> None:
    specs, errors = profiles.load_dir(REPO / "profiles")
    assert errors == []
    assert {"baseline", "high-concurrency", "low-latency", "radix-off", "demo"} <= {s.name for s in specs}
    from collectors.sglang import flags as sglang_flags
    from collectors.sglang import sandbox as sglang_sandbox

    for s in specs:
        assert [i for i in sglang_flags.check_flags(s.flags) if i.severity != "note"] == [], s.name
        assert sglang_sandbox.check_env(s.env) == [], s.name
    demo = next(s for s in specs if s.name == "demo")
    assert demo.entrypoint == "simulator.launch_server"
    assert not any(k.startswith("sim-") for k in demo.flags)  # simulator knobs live in [env]


def test_sync_mirror_and_diff(tmp_path: Path, engine) -> None:
    (tmp_path / "a.toml").write_text(GOOD)
    (tmp_path / "b.toml").write_text(GOOD.replace('"a"', '"b"').replace("0.8", "0.9") + 'SGLANG_LOG_MS = "1"\n')
    rows, errors = profiles.sync_profiles(engine, tmp_path)
    assert errors == [] and [r.name for r in rows] == ["a", "b"]
    stored = repo.get_profile(engine, name="a")
    assert stored.content_hash == profiles.parse_profile(GOOD).content_hash
    assert stored.source_path == str(tmp_path / "a.toml")
    a = profiles.resolve(engine, tmp_path, "a")
    b = profiles.resolve(engine, tmp_path, str(tmp_path / "b.toml"))
    assert profiles.diff(a.canonical(), b.canonical()) == [
        ("flags.mem-fraction-static", 0.8, 0.9), ("env.SGLANG_LOG_MS", None, "1")]
    with pytest.raises(ProfileError, match="No profile named 'zzz'; known: a, b"):
        profiles.resolve(engine, tmp_path, "zzz")


def test_save_from_form_and_toml_audits(tmp_path: Path, engine) -> None:
    settings = Settings(data_dir=tmp_path, database_url="sqlite://", profiles_dir=tmp_path / "profiles")
    spec, changes = profile_admin.save_form(
        engine, settings, name="fast", description="d", model_path="org/m", entrypoint="sglang.launch_server",
        flags=[("mem-fraction-static", "0.8"), ("schedule-policy", '"lpm"'), ("enable-metrics", "true"), ("", "")],
        env=[("NCCL_TIMEOUT", "1800")], actor="alice",
    )
    assert spec.flags == {"mem-fraction-static": 0.8, "schedule-policy": "lpm", "enable-metrics": True}
    assert (tmp_path / "profiles" / "fast.toml").exists()
    text = (tmp_path / "profiles" / "fast.toml").read_text().replace("0.8", "0.7")
    _, changes2 = profile_admin.save_toml(engine, settings, text, "bob")
    assert changes2 == [("flags.mem-fraction-static", 0.8, 0.7)]
    audit = repo.list_audit(engine)
    assert [(a.actor, a.action, a.target) for a in audit] == [("bob", "profile_edit", "fast"), ("alice", "profile_create", "fast")]
    assert audit[0].detail["diff"] == [["flags.mem-fraction-static", "0.8", "0.7"]]
    with pytest.raises(ProfileError):
        profile_admin.save_toml(engine, settings, "name = ", "bob")


def test_spec_from_row_roundtrip(engine) -> None:
    spec = ProfileSpec(name="x", model_path="org/m", flags={"a": 1}, env={"B": "2"})
    row = profiles.mirror(engine, spec)
    assert profiles.from_row(row).content_hash == spec.content_hash
