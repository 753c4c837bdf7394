"""Scorecards: every figure declared once, computed, graded and compared (no Streamlit).

| module | owns |
|---|---|
| metric_specs | METRIC_SPECS: every figure's key, label, dimension, unit, direction, formula; the figures a fleet row and a fleet scorecard carry |
| slo | SLO targets ([slo] table, UI overrides) and pass/warn/fail grading |
| model | the Scorecard value and its export JSON (scorecard.schema.json, schema version 1) |
| inputs | ScorecardInputs: what a scorecard is computed from, plus shared helpers |
| math | the formulas as pure functions of numbers and arrays |
| compute | ScorecardInputs -> Scorecard (latency, throughput, grading) |
| cost_stability | the cost and stability dimensions |
| image | the image-server figures (s/step, stage shares, memory) |
| walls | the "bound by" figures: verdict, wall shares, achieved bandwidth, denoising share, what-if |
| build | build_scorecard(): reads the inputs from storage for a run, a launch or a window |
| compare | two or more scorecards side by side: deltas, config diff, workload check |
| gpu_wall, gpu_wall_stage | which wall a GPU hits (compute, memory bandwidth, power, ...), per diffusion stage too |
| gpu_entries | which GPU entries (cards, MIG instances) a server's series name |
| scorer | the tune lane's scorer: a probe run's scorecard cut down to the ranking's dimensions |
"""
