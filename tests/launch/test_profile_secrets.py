"""The Profiles page's services show secret flags and env as `***`, and a save that leaves `***`
in place keeps the stored value (profile_admin: shown_spec, _keep_secrets, diffs, audit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.settings import Settings
from dashboard.services import profile_admin
from launching import profiles
from launching.profiles import ProfileError
from present import shown
from storage import repo

KEY = "S3CRET"
TEXT = (f'name = "sec"\nmodel_path = "org/m"\n[flags]\napi-key = "{KEY}"\nmax-running-requests = 8\n'
        f'[env]\nHF_TOKEN = "{KEY}"\nNCCL_TIMEOUT = "1800"\n')


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "sec.toml").write_text(TEXT)
    return Settings(data_dir=tmp_path / "data", database_url="sqlite://", profiles_dir=folder)


def test_the_table_and_editor_show_secrets_masked(settings):
    table, specs, _ = profile_admin.profile_table(settings)
    (spec,) = specs
    assert spec.flags == {"api-key": "***", "max-running-requests": 8}
    assert spec.env == {"HF_TOKEN": "***", "NCCL_TIMEOUT": "1800"}
    assert KEY not in profiles.dump_profile(spec)  # the raw TOML editor starts from this
    assert table.iloc[0]["hash"] == profiles.parse_profile(TEXT).content_hash  # the file's hash


def test_saving_the_masked_form_keeps_the_stored_secrets(settings, engine):
    (spec,) = profile_admin.profile_table(settings)[1]
    saved, _ = profile_admin.save_form(
        engine, settings, name="sec", description="edited", model_path="org/m", entrypoint=spec.entrypoint,
        flags=[("api-key", '"***"'), ("max-running-requests", "16")],
        env=[("HF_TOKEN", "***"), ("NCCL_TIMEOUT", "1800")], actor="op")
    on_disk = profiles.load_file(settings.profiles_dir / "sec.toml")
    assert on_disk.flags == {"api-key": KEY, "max-running-requests": 16}
    assert on_disk.env["HF_TOKEN"] == KEY and saved.flags["api-key"] == KEY
    # the raw TOML tab: the same
    profile_admin.save_toml(engine, settings, profiles.dump_profile(profile_admin.shown_spec(on_disk)), "op")
    assert profiles.load_file(settings.profiles_dir / "sec.toml").flags["api-key"] == KEY
    # a new key typed in replaces it
    profile_admin.save_toml(engine, settings, TEXT.replace(f'api-key = "{KEY}"', 'api-key = "n3w"'), "op")
    assert profiles.load_file(settings.profiles_dir / "sec.toml").flags["api-key"] == "n3w"
    audit = [a.detail for a in repo.list_audit(engine)]
    assert KEY not in repr(audit) and "n3w" not in repr(audit)
    assert KEY not in profile_admin.audit_frame(engine).to_string()


def test_a_new_profile_cannot_keep_a_secret_it_never_had(settings, engine):
    with pytest.raises(ProfileError, match="hidden secret"):
        profile_admin.save_form(engine, settings, name="fresh", description="", model_path="org/m",
                                entrypoint="sglang.launch_server", flags=[("api-key", "***")], env=[],
                                actor="op")


def test_diffs_mask_secret_settings(settings, engine):
    plain = profiles.parse_profile(TEXT.replace(f'api-key = "{KEY}"\n', "").replace(f'HF_TOKEN = "{KEY}"\n', "")
                                   .replace('"sec"', '"plain"'))
    rows = profiles.diff(profiles.parse_profile(TEXT).canonical(), plain.canonical())
    frame = shown.diff_frame(rows, "sec", "plain")
    assert KEY not in frame.to_string()
    assert set(frame["setting"]) >= {"flags.api-key", "env.HF_TOKEN"}
