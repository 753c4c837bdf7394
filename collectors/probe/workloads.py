"""Probe workloads: which prompts are sent, with which output length and sampling params.

A workload is a `WorkloadSpec` (JSON-able) that `build_prompts()` turns into a deterministic list
of `Prompt`s; request *i* of a level uses prompt `i % len(prompts)`, so two runs of the same spec
send the same prompts in the same order (which the output-consistency check relies on).

Prompt sets (`WorkloadSpec.prompt_set`):

| name | what |
|---|---|
| `builtin` | the small hand-written set shipped in collectors/probe/prompts/builtin.jsonl (24 prompts) |
| `synthetic` | `num_prompts` prompts of exactly `input_tokens` words each (seeded), for controlled input length |
| `shared-prefix` | `prefix_templates` × `suffixes_per_template` prompts: a template prefix of `prefix_tokens` words shared by its suffixes, like templated product prompts; exercises the radix cache |
| `multi-turn` | `conversations` chats of `turns` turns: turn n sends the whole history (system prompt, every earlier user message and the server's own earlier replies) plus a new user message, so the radix cache can reuse it turn by turn |
| `fork` | `conversations` shared contexts of `prefix_tokens` words, each fanned out to `branches` continuations (what a frontend language's `fork` primitive does, over HTTP): branch 1 goes first, branches 2..K in parallel once it has finished, so they can reuse its prefill |
| a path ending `.jsonl` | one JSON object per line: `{"prompt": str}` (or `"text"`), or `{"messages": [...]}` for chat; optional `"id"`, `"max_new_tokens"` |

Input length: synthetic words are common one-syllable English words, which Llama/Qwen-style BPE
tokenizers encode as one token each (with the leading space), so `input_tokens` words ≈ that many
tokens. The server's own count (`meta_info.prompt_tokens` / `usage.prompt_tokens`) is recorded per
request as `tokens_in`; cross-check there.

`request_body(api, prompt, spec)` is pure: it returns the URL path and JSON body for one request
(an engine's native API builds its own body: collectors/native_api.py).

Programs (multi-turn, fork): a prompt may name the prompt it runs `after` (an index into the
list); the sweep holds it until that request of the same pass has finished (collectors/probe/
sweep.py). The list is ordered so every dependency comes earlier: turn-major for multi-turn
(all turn-1 prompts, then all turn-2 ...), fork by fork (branch 1, then its branches 2..K).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from collectors.engines import native_apis
from collectors.native_api import NativeRequest
from collectors.probe import structured
from collectors.probe.sse import OPENAI_PATHS, native_api
from storage.errors import RequestError

PROMPTS_DIR = Path(__file__).parent / "prompts"
BUILTIN_SETS = ("builtin", "synthetic", "shared-prefix", "multi-turn", "fork")
PROGRAM_SETS = ("multi-turn", "fork")


def api_paths() -> dict[str, str]:
    """The probe's APIs (`--api` name -> URL path): the registered engines' native APIs, then the
    OpenAI ones (collectors/probe/sse.py OPENAI_PATHS); read when asked, so an engine registered
    later counts."""
    return {name: api.path for name, api in native_apis().items() if name not in OPENAI_PATHS} | OPENAI_PATHS


# One-token-ish words (with a leading space) for synthetic prompts.
_WORDS = (
    "the time day way man world life hand part child eye place work week case point home water "
    "room book word side kind head house face friend month light night game line end door tree "
    "road car city team bird fish rain wind snow fire stone river field ship king song story"
).split()


class WorkloadError(RequestError, ValueError):
    """A workload that cannot be built; the message says what to fix."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt: `text` (generate/completions/images) or `messages` (chat; text is derived)."""

    id: str
    text: str
    messages: tuple[dict[str, str], ...] | None = None
    max_new_tokens: int | None = None  # per-prompt override from a JSONL file
    after: int | None = None  # programs: index of the prompt whose request must finish first
    step: dict[str, int] | None = field(default=None, compare=False)  # {"turn", "conversation"} | {"branch", "fork"}


@dataclass(slots=True)
class WorkloadSpec:
    """What each request carries. All fields are JSON-able; see the module docstring."""

    prompt_set: str = "builtin"
    input_tokens: int = 128  # synthetic
    num_prompts: int = 32  # synthetic
    prefix_templates: int = 4  # shared-prefix
    suffixes_per_template: int = 8  # shared-prefix
    prefix_tokens: int = 512  # shared-prefix
    seed: int = 0
    max_new_tokens: int = 128
    ignore_eos: bool = False
    temperature: float = 0.0
    top_p: float | None = None
    top_k: int | None = None
    stop: list[str] | None = None
    model: str | None = None  # OpenAI "model"; None -> "default"
    image_size: str = "512x512"
    image_steps: int | None = None
    image_guidance: float | None = None  # guidance_scale; None: the server's default
    images_per_request: int = 1
    extra: dict[str, Any] = field(default_factory=dict)  # merged into every body
    structured: str | None = None  # json-schema | regex | ebnf (collectors/probe/structured.py)
    structured_spec: str | None = None  # the schema JSON / pattern / grammar text
    turns: int = 4  # multi-turn
    branches: int = 4  # fork
    conversations: int = 8  # multi-turn conversations / fork contexts

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkloadSpec:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise WorkloadError(f"Unknown workload field(s) {unknown}; known: {sorted(known)}.")
        return cls(**data)

    def sampling_params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"temperature": self.temperature}
        if self.top_p is not None:
            out["top_p"] = self.top_p
        if self.top_k is not None:
            out["top_k"] = self.top_k
        if self.stop:
            out["stop"] = list(self.stop)
        return out


def synthetic_text(n_words: int, rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n_words))


def parse_jsonl(text: str, source: str = "<prompts>") -> list[Prompt]:
    """Prompts from JSONL text; a bad line raises WorkloadError naming the line."""
    out: list[Prompt] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise WorkloadError(f"{source} line {lineno} is not JSON ({exc.msg}); fix or remove it.") from None
        if not isinstance(obj, dict):
            raise WorkloadError(f"{source} line {lineno} must be a JSON object with a \"prompt\".")
        pid = str(obj.get("id", f"p{len(out)}"))
        mnt = obj.get("max_new_tokens")
        mnt = int(mnt) if isinstance(mnt, int | float) else None
        if isinstance(obj.get("messages"), list) and obj["messages"]:
            msgs = tuple({"role": str(m["role"]), "content": str(m["content"])} for m in obj["messages"])
            text_ = "\n".join(m["content"] for m in msgs)
            out.append(Prompt(pid, text_, msgs, mnt))
            continue
        prompt = obj.get("prompt", obj.get("text"))
        if not isinstance(prompt, str) or not prompt:
            raise WorkloadError(
                f"{source} line {lineno} has no \"prompt\" string (or \"messages\" list); add one."
            )
        out.append(Prompt(pid, prompt, None, mnt))
    if not out:
        raise WorkloadError(f"{source} holds no prompts; add lines like {{\"prompt\": \"...\"}}.")
    return out


def build_prompts(spec: WorkloadSpec, base_dir: Path | None = None) -> list[Prompt]:
    """The deterministic prompt list of a workload."""
    name = spec.prompt_set
    rng = random.Random(spec.seed)
    if name == "builtin":
        path = PROMPTS_DIR / "builtin.jsonl"
        return parse_jsonl(path.read_text(encoding="utf-8"), "builtin prompt set")
    if name == "synthetic":
        if spec.input_tokens < 1 or spec.num_prompts < 1:
            raise WorkloadError("Synthetic prompts need input_tokens >= 1 and num_prompts >= 1.")
        return [Prompt(f"s{i}", synthetic_text(spec.input_tokens, rng)) for i in range(spec.num_prompts)]
    if name == "shared-prefix":
        if min(spec.prefix_templates, spec.suffixes_per_template, spec.prefix_tokens) < 1:
            raise WorkloadError("Shared-prefix prompts need templates, suffixes and prefix_tokens >= 1.")
        questions = build_prompts(WorkloadSpec(prompt_set="builtin"))
        out = []
        for t in range(spec.prefix_templates):
            prefix = f"Template {t}. " + synthetic_text(spec.prefix_tokens, rng)
            for s in range(spec.suffixes_per_template):
                q = questions[(t * spec.suffixes_per_template + s) % len(questions)].text
                out.append(Prompt(f"t{t}s{s}", f"{prefix}\n\nQuestion: {q}"))
        return out
    if name == "multi-turn":
        return _multi_turn(spec, rng)
    if name == "fork":
        return _fork(spec, rng)
    path = Path(name)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if path.suffix != ".jsonl" or not path.is_file():
        raise WorkloadError(
            f"Prompt set {name!r} is neither one of {list(BUILTIN_SETS)} nor an existing .jsonl file."
        )
    return parse_jsonl(path.read_text(encoding="utf-8"), str(path.name))


SYSTEM_PROMPT = "You are a helpful assistant for a hardware store. Answer briefly."


def _multi_turn(spec: WorkloadSpec, rng: random.Random) -> list[Prompt]:
    """Turn-major: prompt (t, c) at index t*C + c runs after (t-1, c). `messages` holds the system
    prompt and this turn's user message; the history is assembled at send time (`history_messages`)."""
    if spec.turns < 1 or spec.conversations < 1 or spec.input_tokens < 1:
        raise WorkloadError("multi-turn needs --turns >= 1, --conversations >= 1 and --input-tokens >= 1.")
    questions = build_prompts(WorkloadSpec(prompt_set="builtin"))
    n_conv = spec.conversations
    out: list[Prompt] = []
    for t in range(spec.turns):
        for c in range(n_conv):
            q = questions[(c * spec.turns + t) % len(questions)].text
            user = f"{q} ({synthetic_text(max(spec.input_tokens // 4, 1), rng)})"
            msgs = ({"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user})
            out.append(Prompt(f"c{c}t{t + 1}", user, msgs, after=(t - 1) * n_conv + c if t else None,
                              step={"turn": t + 1, "conversation": c}))
    return out


def _fork(spec: WorkloadSpec, rng: random.Random) -> list[Prompt]:
    """Fork by fork: branch 1 of fork f at index f*K, its branches 2..K after it."""
    if spec.branches < 1 or spec.conversations < 1 or spec.prefix_tokens < 1:
        raise WorkloadError("fork needs --branches >= 1, --conversations >= 1 and --prefix-tokens >= 1.")
    k = spec.branches
    out: list[Prompt] = []
    for f in range(spec.conversations):
        context = f"Document {f}. " + synthetic_text(spec.prefix_tokens, rng)
        for b in range(k):
            text = f"{context}\n\nBranch {b + 1}: give angle {b + 1} of {k} on the document in one line."
            out.append(Prompt(f"f{f}b{b + 1}", text, after=f * k if b else None,
                              step={"branch": b + 1, "fork": f}))
    return out


def history_messages(prompt: Prompt, earlier: list[dict[str, str]] | None) -> list[dict[str, str]]:
    """A multi-turn request's messages: the conversation so far (`earlier`, replies included),
    else the prompt's own system message, then this turn's user message."""
    msgs = [dict(m) for m in prompt.messages or ({"role": "user", "content": prompt.text},)]
    if earlier is None:
        return msgs
    return [*earlier, *[m for m in msgs if m["role"] != "system"]]


def transcript(messages: list[dict[str, str]]) -> str:
    """Plain-text form of a conversation for a native API and /v1/completions: each earlier turn is
    a prefix of the next one's text, as with the chat template."""
    parts = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n\n".join(parts) + "\n\nAssistant:"


def prompts_hash(prompts: list[Prompt]) -> str:
    """Content hash of a prompt list (ids, texts, messages, per-prompt lengths), 16 hex chars."""
    h = hashlib.sha256()
    for p in prompts:
        h.update(json.dumps([p.id, p.text, p.messages, p.max_new_tokens]).encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


def length_summary(prompts: list[Prompt]) -> dict[str, Any]:
    """Input-length distribution in words and characters (min / p50 / max, mean)."""
    words = sorted(len(p.text.split()) for p in prompts)
    chars = sorted(len(p.text) for p in prompts)

    def stats(v: list[int]) -> dict[str, float]:
        return {"min": v[0], "p50": v[len(v) // 2], "max": v[-1], "mean": round(sum(v) / len(v), 2)}

    return {"n": len(prompts), "words": stats(words), "chars": stats(chars)}


def request_body(api: str, prompt: Prompt, spec: WorkloadSpec, *,
                 messages: list[dict[str, str]] | None = None, constraint: str | None = None
                 ) -> tuple[str, dict[str, Any]]:
    """(URL path, JSON body) for one request of `api` (see api_paths()). `messages` replaces the
    prompt's own (a multi-turn history); `constraint` is the structured spec as sent
    (structured.wire_spec), used when `spec.structured` is set."""
    max_new = prompt.max_new_tokens or spec.max_new_tokens
    if messages is not None and api != "chat":
        prompt = Prompt(prompt.id, transcript(messages), None, prompt.max_new_tokens)
    body: dict[str, Any]
    wire: tuple[str, str] | None = None
    if spec.structured and api != "images":
        wire = (spec.structured, constraint if constraint is not None else spec.structured_spec or "")
    native = native_api(api)
    if native is not None:
        body = native.build_body(NativeRequest(text=prompt.text, max_new_tokens=max_new,
                                               sampling=spec.sampling_params(),
                                               ignore_eos=spec.ignore_eos, constraint=wire))
        path = native.path
    elif api in ("completions", "chat"):
        body = {
            "model": spec.model or "default",
            "max_tokens": max_new,
            "stream": True,
            # usage (prompt/completion/cached tokens) arrives in a final chunk
            "stream_options": {"include_usage": True},
        } | spec.sampling_params()
        if spec.ignore_eos:
            body["ignore_eos"] = True  # the engine's extension of the OpenAI API
        if api == "chat":
            msgs = messages or prompt.messages or ({"role": "user", "content": prompt.text},)
            body["messages"] = [dict(m) for m in msgs]
        else:
            body["prompt"] = prompt.text
        if wire is not None:
            body.update(structured.openai_fields(*wire))
        path = OPENAI_PATHS[api]
    elif api == "images":
        body = {
            "prompt": prompt.text,
            "n": spec.images_per_request,
            "size": spec.image_size,
            "response_format": "b64_json",
        }
        if spec.model:
            body["model"] = spec.model
        if spec.image_steps is not None:
            body["num_inference_steps"] = spec.image_steps
        if spec.image_guidance is not None:
            body["guidance_scale"] = spec.image_guidance
        body["seed"] = spec.seed
        path = OPENAI_PATHS[api]
    else:
        raise WorkloadError(f"Unknown API {api!r}; use one of {list(api_paths())}.")
    body.update(spec.extra)
    return path, body
