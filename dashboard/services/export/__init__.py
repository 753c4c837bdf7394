"""Review exports of scorecards and comparisons (no Streamlit).

| module | owns |
|---|---|
| formats | Markdown, CSV, JSON and PNG; render() and write_export() for every format |
| html | the single-file HTML export |
| cli | `pitwall export` |
"""
