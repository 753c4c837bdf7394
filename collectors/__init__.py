"""Collectors: turn what an inference server says and does into Samples and Events."""
