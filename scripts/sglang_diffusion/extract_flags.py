"""Write the diffusion server's flag table from an unpacked SGLang wheel (no torch needed).

Usage: ``python scripts/sglang_diffusion/extract_flags.py UNPACKED_WHEEL_DIR VERSION > OUT.json``
where UNPACKED_WHEEL_DIR holds ``sglang/multimodal_gen/`` (``pip download sglang==VERSION
--no-deps`` then unzip). It reads the ``add_argument`` calls that ``sglang serve`` registers for a
diffusion model (``add_multimodal_gen_serve_args`` -> ``ServerArgs.add_cli_args`` and the
pipeline / quantization / VAE / DiT config hooks it calls) with ``ast``, without importing SGLang,
because the real module needs torch and a GPU platform. Output: {"version", "prog", "flags":
[{"names", "kind", "type", "choices"}]}, kind one of switch (store_true), optional (SGLang's
StoreBoolean: bare or true/false), list (nargs + or *), value. Written to
collectors/sglang/sglang-diffusion-VERSION-flags.json and simulator/sglang_VERSION_diffusion_flags.json.
"""

from __future__ import annotations

import ast
import json
import sys
from typing import Any

ROOT = sys.argv[1].rstrip("/") + "/sglang/multimodal_gen/" if len(sys.argv) > 2 else ""
FUNCS = {
    "serve": ("runtime/entrypoints/cli/serve.py", None, "add_multimodal_gen_serve_args"),
    "ServerArgs": ("runtime/server_args/server_args.py", "ServerArgs", "add_cli_args"),
    "PipelineConfig": ("configs/pipeline_configs/base.py", "PipelineConfig", "add_cli_args"),
    "NunchakuSVDQuantArgs": ("configs/quantization/nunchaku.py", "NunchakuSVDQuantArgs",
                             "add_cli_args"),
    "DiTConfig": ("configs/models/dits/base.py", "DiTConfig", "add_cli_args"),
    "VAEConfig": ("configs/models/vaes/base.py", "VAEConfig", "add_cli_args"),
    "T5Config": ("configs/models/encoders/t5.py", "T5Config", "add_cli_args"),
}
# Choices SGLang names by constant; their values as the 0.5.23 source defines them.
CONSTANTS = {"PERFORMANCE_MODES": ["manual", "auto", "speed", "memory"],
             "list(WARMUP_MODES)": ["off", "request", "server"],
             "LORA_MERGE_MODES": ["auto", "merge", "dynamic"],
             "Backend.choices()": ["auto", "sglang", "diffusers"]}


def find(key: str) -> ast.FunctionDef:
    path, cls, fn = FUNCS[key]
    with open(ROOT + path) as fh:
        tree = ast.parse(fh.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and cls and node.name != cls:
            continue
        body = node.body if isinstance(node, ast.ClassDef | ast.Module) else []
        for f in body:
            if isinstance(f, ast.FunctionDef) and f.name == fn:
                return f
    raise SystemExit(f"{fn} not found in {path}")


def render(node: ast.expr, env: dict[str, str]) -> Any:
    """A flag name: a constant, or an f-string over the hook's ``prefix`` variables."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.JoinedStr):
        out = ""
        for v in node.values:
            if isinstance(v, ast.Constant):
                out += str(v.value)
            elif isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name):
                out += env[v.value.id]
            else:
                raise ValueError(ast.dump(v))
        return out
    return None


def flag_entry(node: ast.Call, env: dict[str, str]) -> dict[str, Any]:
    kw = {k.arg: k.value for k in node.keywords}
    action, nargs, choices, typ = (kw.get("action"), kw.get("nargs"), kw.get("choices"),
                                   kw.get("type"))
    act = (action.value if isinstance(action, ast.Constant) else
           action.id if isinstance(action, ast.Name) else None)
    ch: Any = None
    if isinstance(choices, ast.List | ast.Tuple):
        ch = [c.value for c in choices.elts if isinstance(c, ast.Constant)]
    elif choices is not None:
        ch = CONSTANTS.get(ast.unparse(choices))
    type_name = ast.unparse(typ) if typ is not None else "str"
    kind = ("optional" if act == "StoreBoolean" else "switch" if act in ("store_true", "store_false")
            else "list" if nargs is not None and render(nargs, env) in ("+", "*") else "value")
    if act == "StoreBoolean":
        ch, type_name = ["true", "false"], "bool"
    return {"names": [render(a, env) for a in node.args], "kind": kind,
            "type": type_name if type_name in ("int", "float", "str", "bool") else "str",
            "choices": [str(c) for c in ch] if ch else None}


def collect(key: str, env: dict[str, str], out: list[dict[str, Any]]) -> None:
    f = find(key)
    names = [a.arg for a in f.args.args]
    for name, d in zip(names[len(names) - len(f.args.defaults):], f.args.defaults, strict=True):
        if name not in env and isinstance(d, ast.Constant):
            env[name] = d.value
    if "prefix" in env:
        env.setdefault("prefix_with_dot", f"{env['prefix']}." if env["prefix"].strip() else "")
    for node in ast.walk(f):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr == "add_argument":
            out.append(flag_entry(node, env))
        elif (node.func.attr == "add_cli_args" and isinstance(node.func.value, ast.Name)
              and node.func.value.id in FUNCS):
            kw = {k.arg: render(k.value, env) for k in node.keywords}
            collect(node.func.value.id, {"prefix": kw["prefix"]} if "prefix" in kw else {}, out)


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    raw: list[dict[str, Any]] = []
    collect("serve", {}, raw)
    seen: set[str] = set()
    flags = []
    for f in raw:
        if f["names"][0] not in seen:
            seen.update(f["names"])
            flags.append(f)
    json.dump({"version": sys.argv[2], "prog": "sglang", "flags": flags}, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
