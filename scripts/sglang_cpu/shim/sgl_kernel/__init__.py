"""TEST-ENVIRONMENT SHIM, never part of Pitwall: an import-only stand-in for SGLang's CPU `sgl_kernel`.

With SGLANG_USE_CPU_ENGINE=1, SGLang 0.5.23 imports about ten names from `sgl_kernel` at module load
(`copy_all_layer_kv_cache_cpu`, `assign_req_to_token_pool_cpu`, ...). The CPU build of that package is
on no reachable registry, so this shim satisfies the imports. On a CPU without AMX SGLang takes its
native-torch paths and never calls these (they serve speculative decoding, HiCache and TP>1 allreduce).
Any call raises, and the real-SGLang tests assert the log never contains "sgl_kernel stub:".
It is put on PYTHONPATH only for the real server started by the real_sglang test tier.
"""


def __getattr__(name: str):  # PEP 562 module-level attribute hook
    if name.startswith("__"):
        raise AttributeError(name)

    def _missing(*args: object, **kwargs: object) -> None:
        raise NotImplementedError(f"sgl_kernel stub: {name} called")

    _missing.__name__ = name
    return _missing
