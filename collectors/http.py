"""HTTP pieces every engine's clients share: the OpenAI-style `Authorization: Bearer` header.

Engine-neutral (SGLang and vLLM both take `--api-key` and check this header); the collectors, the
canary, the probe client and the supervisor's readiness checks all build it here.
Cross-check: `curl -H "Authorization: Bearer $KEY" $URL/v1/models`.
"""

from __future__ import annotations


def auth_headers(api_key: str | None) -> dict[str, str]:
    """{"Authorization": "Bearer <key>"} when a key is set, else {} (no header at all)."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}
