"""Read models the live pages draw (no Streamlit): plain values and DataFrames from storage.

| module | owns |
|---|---|
| overview | one card per server: status, grades, key figures, GPUs, latest events |
| timeseries | the Server page's chart series (SQL-bucketed) and event reads |
| servers | the configured servers (and the demo server) mirrored into storage |
"""
