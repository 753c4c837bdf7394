"""Read models the live pages draw (no Streamlit): plain values and DataFrames from storage.

| module | owns |
|---|---|
| overview | one card per server: status, grades, key figures, GPUs, latest events |
| timeseries | the Server page's chart series (SQL-bucketed) and event reads |
| image_panels | an image server's pipeline charts: stages, s/step, memory, queue |
| gpu_wall_panel | the GPU-wall panel: verdict per GPU with evidence, GPM chart, denoising share and what-if |
| servers | the configured servers (and the demo server) mirrored into storage |
"""
