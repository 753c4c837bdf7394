"""Secrets out of everything Pitwall shows, exports or keeps as an excerpt: the one redaction module.

Pure (strings and plain containers in, copies out), no Pitwall imports, so every layer can use
it: storage writes excerpts through it, the runner and collectors call it before storing server
info, services call it before a page, an export or the CLI sees a value.

What counts as a secret *name* (`secret_name`, case-insensitive, `-` and `_` alike): anything
holding `api_key` / `apikey`, `password` / `passwd`, `secret`, `authorization`, `credential(s)`,
`cookie`, `webhook_url` (a chat webhook's path is its credential); a name whose last word is `token` (`hf_token`, `GITHUB_TOKEN`, `--token`; not
`max_total_tokens`, `tokenizer_path`, `speculative_token_map`, nor a count or marker such as
`bucket_time_to_first_token`, `eos_token`); a `<x>_key` where x is `api`,
`private`, `secret`, `access`, `token`, `watermark`, `encryption`, `signing`.

A secret value becomes `***` (MASK). None, booleans and empty strings stay: `api_key: None`
says "no key" and hides nothing.

- `redact_obj(obj)`: dicts and lists recursively: the value of a secret key is masked; a list
  of strings is treated as an argv (`--api-key X`, `--api-key=X`, `HF_TOKEN=X`); every other
  string goes through `redact_text`.
- `redact_text(text)`: free text (log excerpts, messages, command lines): `api_key='X'` (the
  `ServerArgs(...)` repr), `'api_key': 'X'` / `"api_key": "X"` (dict repr, JSON, an engine's
  `server_args={...}` log line), `api_key: X`, `HF_TOKEN=X`, `--api-key X`, `--api-key=X`,
  `Authorization: Bearer X` / `Basic X` (and after an Authorization header, `token X`, `Negotiate X`,
  `Digest ...` to the end of the value), and URLs with a password (`scheme://user:X@host`).
- `redact_url(url)`: the password of a URL's userinfo (and secret query parameters); the user,
  host, port, path and database stay readable.

Cross-check: `grep -c S3CRET` over any page, export or CLI output is 0
(tests/foundation/test_secrets.py does exactly that).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"

_ANYWHERE = ("api_key", "apikey", "password", "passwd", "secret", "authorization", "credential",
             "cookie", "webhook_url")
_KEY_OWNERS = frozenset({"api", "private", "secret", "access", "token", "watermark", "encryption",
                         "signing"})
# `<x>_token` is a count or a marker, not a credential, when x is one of these
# (`bucket_time_to_first_token`, `kt_max_deferred_experts_per_token`, `eos_token`)
# and an engine log's counters (`#cached-token: 0`, `#pending-token`, `inter-token`)
_NOT_CREDENTIAL_TOKEN = frozenset({"per", "first", "second", "last", "next", "each", "every", "eos",
                                   "bos", "pad", "unk", "sep", "cls", "mask", "special", "stop",
                                   "start", "end", "image", "input", "output", "prefix", "draft",
                                   "new", "max", "min", "num", "cached", "pending", "replay",
                                   "inter", "total", "prompt", "completion", "generated",
                                   "decode", "prefill"})
_KEEP_VALUES = frozenset({"none", "null", "nil", "true", "false", "", MASK.lower(), "<redacted>"})
_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "negotiate"})


def _secret_kind(name: str) -> str | None:
    """"token" when `name` is a secret only by ending in `token`, "secret" for the other rules,
    None when it is no secret name."""
    k = name.strip().strip("'\"").lstrip("-").lower().replace("-", "_").replace(".", "_")
    if not k:
        return None
    if any(word in k for word in _ANYWHERE):
        return "secret"
    words = [w for w in k.split("_") if w]
    if not words:
        return None
    if words[-1] == "token":
        return "token" if len(words) == 1 or words[-2] not in _NOT_CREDENTIAL_TOKEN else None
    if len(words) >= 2 and words[-1] in ("key", "keys") and words[-2] in _KEY_OWNERS:
        return "secret"
    return None


def secret_name(name: str) -> bool:
    """True when a key, flag or environment variable named `name` holds a secret."""
    return _secret_kind(name) is not None


def masked_value(value: Any) -> Any:
    """The mask for a secret value; None, booleans and empty values are no secret."""
    if value is None or isinstance(value, bool) or value in ("", [], {}):
        return value
    return MASK


# ---------------------------------------------------------------------------------------------
# free text

# `--api-key X`, `--api-key=X` (a command line quoted in a log or in /server_info launch_command)
_FLAG = re.compile(r"(?<![\w-])--(?P<key>[A-Za-z][\w.-]*)(?P<sep>=|[ \t]+)")
# `api_key=X`, `'api_key': X`, `"api_key": X`, `api_key: X`, `HF_TOKEN=X`
_KEYSEP = re.compile(r"(?P<q>['\"]?)(?P<key>[A-Za-z_][\w.-]*)(?P=q)(?P<sep>[ \t]*[:=][ \t]*)")
_VALUE = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"|[^\s,;&)}\]'\"]+")
_AUTH = re.compile(r"(?i)\b(?P<scheme>bearer|basic)(?P<sep>[ \t]+)(?P<cred>[A-Za-z0-9._~+/=:-]+)")
# `Authorization: token X` / `Negotiate X` / `Digest username="u", response="..."`: after an
# Authorization header's name only (the bare words are ordinary prose); the rest of the value
_AUTH_OTHER = re.compile(r"(?i)\b(?P<head>(?:proxy-)?authorization['\"]?[ \t]*[:=][ \t]*['\"]?)"
                         r"(?P<scheme>token|digest|negotiate)(?P<sep>[ \t]+)(?P<cred>(?:[^\n'\"]|\"[^\"\n]*\")+)")
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")
_PROSE_BEFORE = re.compile(r"\b([a-z]+) $")  # the word right before `token`
_PROSE_AFTER = re.compile(r" [a-z]+ ")  # ... and more words after the value


def _prose(text: str, m: re.Match[str], value: str) -> bool:
    """`... first token: prefill dispatch to ...`: the bare word `token` after a word that makes it
    a count or a marker (`first`, `next`, `output`: _NOT_CREDENTIAL_TOKEN), with an unquoted
    lowercase word after its colon and more words after that, is prose, not a credential;
    `auth token: secretpass for the hub`, `token: changeme`, `token=x`, a quoted value or a flag
    stay masked."""
    before = _PROSE_BEFORE.search(text, 0, m.start())
    return (m.group("key").lower() == "token" and ":" in m.group("sep") and not m.group("q")
            and before is not None and before.group(1) in _NOT_CREDENTIAL_TOKEN
            and value.isalpha() and value.islower() and bool(_PROSE_AFTER.match(text, m.end() + len(value))))
_URL_USERINFO = re.compile(
    r"(?P<head>\b[A-Za-z][\w+.-]*://[^\s:/@'\"]*):(?P<pw>[^\s@'\"/]+)@")


def _replace_values(text: str, pattern: re.Pattern[str], *, flag: bool) -> str:
    out: list[str] = []
    pos = 0
    for m in pattern.finditer(text):
        kind = _secret_kind(m.group("key")) if m.start() >= pos else None
        if kind is None:
            continue
        vm = _VALUE.match(text, m.end())
        if vm is None:
            continue
        value = vm.group(0)
        bare = value.strip("'\"")
        if bare.lower() in _KEEP_VALUES or bare.lower() in _SCHEMES:
            continue  # no secret (None), or `Authorization: Bearer X`: the scheme pass masks X
        if bare == m.group("key").upper().replace("-", "_"):
            continue  # argparse usage text: `[--api-key API_KEY]` names the value, holds none
        if kind == "token" and _NUMBER.fullmatch(bare):
            continue  # an engine log's counters: `#token: 512`, `#full token: 1000`
        if kind == "token" and not flag and _prose(text, m, value):
            continue  # prose: a router's HELP text `... to first token: prefill dispatch to ...`
        if flag and value.startswith("-"):
            continue  # the flag took no value: the next item is another flag
        quote = value[0] if value[0] in "'\"" and len(value) > 1 and value[-1] == value[0] else ""
        out.append(text[pos:vm.start()])
        out.append(f"{quote}{MASK}{quote}")
        pos = vm.end()
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


def redact_text(text: str) -> str:
    """`text` with every secret form listed in the module docstring masked."""
    if not text or not isinstance(text, str):
        return text
    text = _URL_USERINFO.sub(lambda m: f"{m.group('head')}:{MASK}@", text)
    text = _AUTH.sub(lambda m: m.group(0) if m.group("cred") == MASK
                     else f"{m.group('scheme')}{m.group('sep')}{MASK}", text)
    text = _AUTH_OTHER.sub(lambda m: m.group(0) if m.group("cred") == MASK
                           else f"{m.group('head')}{m.group('scheme')}{m.group('sep')}{MASK}", text)
    text = _replace_values(text, _FLAG, flag=True)
    return _replace_values(text, _KEYSEP, flag=False)


# ---------------------------------------------------------------------------------------------
# structures


_ARG_FLAG = re.compile(r"(?P<name>--?[A-Za-z][\w.-]*)(?:(?P<eq>=)(?P<value>.*))?", re.S)
_ARG_ENV = re.compile(r"(?P<name>[A-Za-z_][\w.-]*)=(?P<value>.*)", re.S)


def redact_argv(argv: list[str]) -> list[str]:
    """A copy of an argument list with the value of every secret flag masked (`--api-key X`,
    `--api-key=X`, `--hf-token X`) and `NAME=X` items of secret names masked."""
    out: list[str] = []
    mask_next = False
    for item in argv:
        if mask_next:
            mask_next = False
            if not item.startswith("--"):
                out.append(masked_value(item))
                continue
        flag = _ARG_FLAG.fullmatch(item)
        if flag is not None and secret_name(flag.group("name")):
            if flag.group("eq"):
                out.append(f"{flag.group('name')}={masked_value(flag.group('value'))}")
            else:
                out.append(item)
                mask_next = True
            continue
        env = _ARG_ENV.fullmatch(item)
        if env is not None and secret_name(env.group("name")):
            out.append(f"{env.group('name')}={masked_value(env.group('value'))}")
            continue
        out.append(redact_text(item))
    return out


def redact_obj(obj: Any) -> Any:
    """A redacted copy of a JSON-like value (dict, list, tuple, str, scalars)."""
    if isinstance(obj, Mapping):
        return {k: (masked_value(v) if isinstance(k, str) and secret_name(k) else redact_obj(v))
                for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        if obj and all(isinstance(x, str) for x in obj):
            return redact_argv(list(obj))
        return [redact_obj(x) for x in obj]
    if isinstance(obj, str):
        return redact_text(obj)
    return obj


def redact_url(url: str) -> str:
    """The URL with its userinfo password (and secret query parameters) masked; user, host, port,
    path and the rest stay. Text that is not a URL goes through `redact_text`."""
    if not url or not isinstance(url, str):
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact_text(url)
    if not parts.scheme or not parts.netloc:
        return redact_text(url)
    netloc = parts.netloc
    userinfo, at, host = netloc.rpartition("@")
    if at:
        user, colon, password = userinfo.partition(":")
        if colon and password:
            netloc = f"{user}:{MASK}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(secret_name(k) for k, _ in pairs):
            query = urlencode([(k, MASK if secret_name(k) and v else v) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_webhook_url(url: str) -> str:
    """A webhook URL as it may be shown: scheme and host only (Slack-style webhooks carry their
    credential in the path, `https://hooks.example/services/T0/B0/XXXX` -> `https://hooks.example/***`)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    if not parts.scheme or not parts.hostname:
        return MASK
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}/{MASK}"


def redact_fields(fields: Mapping[str, Any], *, text: tuple[str, ...] = (),
                  obj: tuple[str, ...] = ()) -> dict[str, Any]:
    """A copy of a row's `fields` with the named text columns through `redact_text` and the named
    JSON columns through `redact_obj` (the write-time redaction of storage/repo)."""
    out = dict(fields)
    for name in text:
        if isinstance(out.get(name), str):
            out[name] = redact_text(out[name])
    for name in obj:
        if out.get(name) is not None:
            out[name] = redact_obj(out[name])
    return out
