"""Launching inference servers, no Streamlit: what a profile is, whether it may start, how.

| module | owns |
|---|---|
| profiles | launch profiles as data: TOML files, ProfileSpec, sync into the database, diffs |
| launcher | validation (sandbox, flags, guardrails), the runner's Planner, lifecycle intents |
| sandbox | the launch sandbox over the engine's deny table |
| guardrails | port, GPU, model path and tp x dp checks |
| preflight | host facts (GPU memory, disk) against what a profile needs |
| check | a named profile checked as the runner's check lane does it, with its audit row |
"""
