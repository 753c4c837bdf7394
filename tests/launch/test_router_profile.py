"""A router profile (a disaggregated service's front): checked against sglang-router 0.3.2's own
flag table, started without a model, refused where it would put a secret on the command line,
and the bundled demo service's profiles valid."""

from __future__ import annotations

from pathlib import Path

from collectors.engines import get_engine
from launching import launcher
from launching.profiles import parse_profile

ROUTER = ('name = "r"\nmodel_path = "Qwen/Qwen2.5-7B-Instruct"\nentrypoint = "sglang_router.launch_router"\n'
          '[flags]\npd-disaggregation = true\nprefill = "http://10.0.0.5:30000"\ndecode = "http://10.0.0.6:30000"\n')
REPO = Path(__file__).resolve().parents[2]


def _errors(text: str) -> list[str]:
    report = launcher.validate(parse_profile(text), None, use_real_parser=False)
    return [i.message for i in report.errors]


def test_a_router_profile_starts_the_router_without_a_model() -> None:
    spec = parse_profile(ROUTER)
    argv = get_engine("sglang").build_argv("py", spec.entrypoint, spec.model_path, "127.0.0.1", 30000, spec.flags)
    assert argv == ["py", "-m", "sglang_router.launch_router", "--pd-disaggregation",
                    "--prefill=http://10.0.0.5:30000", "--decode=http://10.0.0.6:30000",
                    "--host=127.0.0.1", "--port=30000"]
    report = launcher.validate(spec, None, use_real_parser=False)
    assert report.ok and report.checked_by == "bundled SGLang router flag table"
    assert not any(i.flag == "model_path" for i in report.issues)  # it loads no model


def test_several_workers_and_a_bootstrap_port_are_one_flag_each() -> None:
    flags = {"pd-disaggregation": True, "prefill": ["http://p1:30000 8998", "http://p2:30000"],
             "decode": ["http://d1:30000", "http://d2:30000"]}
    argv = get_engine("sglang").build_argv("py", "sglang_router.launch_router", "m", "127.0.0.1", 1, flags)
    assert argv[3:] == ["--pd-disaggregation", "--prefill", "http://p1:30000", "8998", "--prefill=http://p2:30000",
                        "--decode=http://d1:30000", "--decode=http://d2:30000", "--host=127.0.0.1", "--port=1"]
    bad = ROUTER.replace('decode = "http://10.0.0.6:30000"', 'decode = "http://10.0.0.6:30000 8998"')
    assert any("only a prefill worker takes a bootstrap port" in e for e in _errors(bad))
    assert any("a worker is an http(s) URL" in e for e in _errors(ROUTER.replace("http://10.0.0.6:30000", "http://x;rm")))


def test_router_flags_are_judged_by_the_routers_table() -> None:
    assert _errors(ROUTER + "polcy = \"round_robin\"\n") == [
        "--polcy is not an sglang-router 0.3.2 flag. Did you mean --policy?"]
    assert _errors(ROUTER + "policy = \"fastest\"\n")  # not one of its choices
    assert _errors(ROUTER + "mem-fraction-static = 0.8\n")  # a server flag, not the router's


def test_a_router_profile_refuses_secrets_on_argv_and_workers_that_are_not_urls() -> None:
    assert any("api-key cannot be set in a router profile" in e for e in _errors(ROUTER + 'api-key = "k"\n'))
    assert any("a worker is an http(s) URL" in e for e in _errors(ROUTER.replace("http://10.0.0.6:30000", "10.0.0.6:30000")))
    no_decode = ROUTER.replace('decode = "http://10.0.0.6:30000"\n', "")
    assert any("pd-disaggregation needs a prefill and a decode worker" in e for e in _errors(no_decode))
    server_flags = ROUTER.split("[flags]")[0] + '[flags]\nenable-metrics = true\n'
    assert any("starts the router: name its workers" in e for e in _errors(server_flags))
    wrong_entry = ROUTER.replace("sglang_router.launch_router", "sglang.launch_server")
    assert any("the router's entrypoint is" in e for e in _errors(wrong_entry))


def test_the_demo_services_profiles_are_valid() -> None:
    for name in ("demo-pd-prefill", "demo-pd-prefill-slow-link", "demo-pd-decode", "demo-pd-router"):
        spec = parse_profile((REPO / "profiles" / f"{name}.toml").read_text())
        report = launcher.validate(spec, None, use_real_parser=False)
        assert report.ok, (name, report.lines())


def test_a_router_profile_opens_the_metrics_port_its_server_reads() -> None:
    from storage.models import Server

    server = Server(name="r", base_url="http://127.0.0.1:30112", service="chat", role="router",
                    metrics_url="http://127.0.0.1:30113/metrics")
    spec = parse_profile(ROUTER + 'prometheus-host = "127.0.0.1"\nprometheus-port = 30113\n')
    assert not [i for i in launcher.validate(spec, server, use_real_parser=False).issues if i.flag and i.flag.startswith("prometheus")]
    spec = parse_profile(ROUTER)  # the defaults: 0.0.0.0:29000
    issues = {i.flag: i for i in launcher.validate(spec, server, use_real_parser=False).issues}
    assert issues["prometheus-port"].severity == "error" and "set prometheus-port = 30113" in issues["prometheus-port"].message
    assert issues["prometheus-host"].severity == "warning"
    prefill = Server(name="p", base_url="http://127.0.0.1:30110", service="chat", role="prefill")
    assert any("is the prefill of service chat" in e.message for e in launcher.validate(spec, prefill, use_real_parser=False).errors)
    assert any("expected a port number" in e.message
               for e in launcher.validate(parse_profile(ROUTER + 'prometheus-port = "x"\n'), server, use_real_parser=False).errors)
