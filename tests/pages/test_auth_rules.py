"""Pure rules of components/auth.py: the Host check (DNS rebinding) and roles from passwords
(check_password itself: tests/launch/test_profiles_page.py)."""

from __future__ import annotations

import pytest

from config.settings import load_settings
from dashboard.components import auth


def _settings(tmp_path, **env: str):
    return load_settings(env={"PITWALL_DATA_DIR": str(tmp_path), **env}, cwd=tmp_path)


@pytest.mark.parametrize("host", [
    None, "", "localhost", "localhost:8501", "LOCALHOST.", "127.0.0.1:8501", "[::1]:8501", "[::1]",
    "10.1.2.3:8501", "[2001:db8::1]:443",  # an IP address cannot be rebound to another name
])
def test_loopback_ip_and_missing_hosts_are_allowed(tmp_path, host):
    assert auth.host_allowed(host, _settings(tmp_path))


@pytest.mark.parametrize("host", [
    "attacker.example", "attacker.example:8501", "localhost.attacker.example", "127.0.0.1.nip.io",
    "user@localhost", "localhost/x", "localhost:99999", "localhost:abc",
    "::1",  # an IPv6 Host header is bracketed (RFC 7230); browsers never send it bare
])
def test_other_names_and_malformed_hosts_are_refused(tmp_path, host):
    assert not auth.host_allowed(host, _settings(tmp_path))


def test_allowed_hosts_and_the_bound_name(tmp_path):
    s = _settings(tmp_path, PITWALL_ALLOWED_HOSTS="Pitwall.Example.com, ops.example.com")
    assert s.allowed_hosts == ("pitwall.example.com", "ops.example.com")
    assert auth.host_allowed("pitwall.example.com", s)
    assert auth.host_allowed("PITWALL.example.com.:443", s)
    assert not auth.host_allowed("www.pitwall.example.com", s)  # exact names, no wildcards
    assert auth.host_allowed("gpu-box.lan:8501", s, bound="gpu-box.lan")
    s = _settings(tmp_path, PITWALL_HOST="gpu-box.lan")
    assert auth.host_allowed("gpu-box.lan:8501", s)


def test_allowed_hosts_from_the_config_file(tmp_path):
    (tmp_path / "pitwall.toml").write_text('allowed_hosts = ["pitwall.example.com"]\nsession_ttl_s = 600\n')
    s = load_settings(env={}, cwd=tmp_path)
    assert s.allowed_hosts == ("pitwall.example.com",) and s.session_ttl_s == 600.0


def test_roles_from_passwords(tmp_path):
    s = _settings(tmp_path, PITWALL_PASSWORD="op", PITWALL_VIEWER_PASSWORD="view")
    assert auth.role_of("op", s) == auth.OPERATOR
    assert auth.role_of("view", s) == auth.VIEWER
    assert auth.role_of("", s) is None and auth.role_of("op ", s) is None
    assert auth.role_of("op", _settings(tmp_path)) is None  # no password set: nothing matches



def test_streamlit_config_keeps_xsrf_and_same_origin_on():
    import tomllib

    from pwtest import REPO

    server = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text(encoding="utf-8"))["server"]
    assert server["enableXsrfProtection"] is True and server["enableCORS"] is True
    assert server["address"] == "127.0.0.1"
