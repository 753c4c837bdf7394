"""Review exports of scorecards and comparisons (no Streamlit).

| module | owns |
|---|---|
| formats | Markdown, CSV, JSON and PNG; render() and write_export() for every format |
| verdict | the words every format leads with: grades, a comparison's sentence and grouped verdicts |
| escape | the one escaping of server-supplied text per format: Markdown (md_text) and CSV (csv_cell) |
| html | the single-file HTML export |
| charts | DataFrame -> Altair chart builders and the charts of a scorecard (SVG/PNG) |
| cli | `pitwall export` |
"""
