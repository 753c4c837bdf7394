"""Collectors: turn what an SGLang server says and does into Samples and Events."""
