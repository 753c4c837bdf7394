"""SGLang 0.5.23-compatible stand-in server for demo, tests and what-if runs.

Run it as ``python -m simulator.launch_server [SGLang launch flags] [--sim-* knobs]``.
It imports nothing of Pitwall (dashboard, collectors, storage): Pitwall must treat it exactly as
a real SGLang server. Module map:

- ``args``        the argparse parser (``build_parser()``) and derived settings
- ``costmodel``   GPU spec table, model shape, KV pool sizing, roofline step times
- ``tokenizer``   deterministic word-piece stand-in tokenizer
- ``radix``       radix prefix cache over token ids with LRU eviction
- ``scheduler``   continuous batching (chunked prefill, queueing, retraction) on a model clock
- ``logfmt``      the 0.5.23 log line formats (pure functions)
- ``metrics``     Prometheus metrics (private registry) for the LLM and diffusion servers
- ``llm_server``  aiohttp routes of the LLM server
- ``image_server`` the ``sglang serve`` diffusion server stand-in and its PNG writer
- ``faults``      ``--sim-fault`` specs
- ``launch_server`` the entry point
"""
