"""Everything SGLang-specific: log forms, metric aliases, HTTP endpoints, the flag table and the
launch command (sglang-interfaces.md is the source of truth for all of them)."""
