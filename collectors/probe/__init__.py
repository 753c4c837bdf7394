"""Synthetic probes and load sweeps: what a client sees under concurrency, measured exactly.

Split like GuideLLM / AIPerf: `workloads` (prompts, lengths, sampling), `pacing` (closed-loop
concurrency, open-loop Poisson rate, stop conditions, self-check), `client` + `sse` (aiohttp
streaming, per-request records), `report` (exact numpy percentiles per level), `fingerprint`
(workload hash + diff), `consistency` (outputs vs a baseline run), `sweep` (a whole sweep, one
process), `store` (ProbeRun / ProbeRequest rows), `cli` (`pitwall probe`).
"""
