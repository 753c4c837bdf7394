"""SGLang 0.5.23-compatible stand-in server for demo, tests and what-if runs.

Run it as ``python -m simulator.launch_server [SGLang launch flags] [--sim-* knobs]`` (knobs also
as ``SGLANG_SIM_*`` environment variables). It imports nothing of Pitwall (dashboard, collectors,
storage): Pitwall treats it exactly as a real SGLang server. Module map:

- ``launch_server`` entry point; ``args`` the parser (``build_parser()``) and knob table
- ``costmodel``     GPU spec table, model shape, KV pool sizing, roofline step times
- ``tokenizer``     deterministic word-piece stand-in tokenizer and seeded generator
- ``radix``         radix prefix cache over token ids with LRU eviction
- ``kvpool``        KV token pool shared by the radix tree and requests
- ``request``       the request record shared by scheduler and HTTP layer
- ``scheduler``     continuous batching (chunked prefill, queueing, retraction) on a model clock
- ``logfmt``        the 0.5.23 log line formats (pure functions) and the line writer
- ``metrics``       Prometheus families of a real 0.5.23 server (``sglang_0_5_23_metrics.json``)
                    and the diffusion server's
- ``llm_api``       request parsing / response shaping; ``llm_routes`` the aiohttp handlers;
                    ``llm_server`` settings, startup, callbacks (``sglang_0_5_23_server_args.json``
                    holds the ServerArgs field set /server_info reports)
- ``lifecycle``     bind, access log, API key, signals, death
- ``image_server``  the ``sglang serve`` diffusion server stand-in and its PNG writer
- ``faults``        ``--sim-fault`` specs and the PyTorch/SGLang text they print
- ``gpu_activity``  what each simulated GPU ran (roofline FLOPs and bytes per forward), averaged
                    into DCGM's profiling ratios, power and energy
- ``dcgm``          the dcgm-exporter look-alike (``SGLANG_SIM_DCGM_PORT``, ``SGLANG_SIM_GPU_INDEX``)
"""
