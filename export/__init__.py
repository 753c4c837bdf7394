"""Review exports of scorecards, comparisons, the fleet and tune runs (no Streamlit); the
Compare, Server, Overview and Tune pages offer them as downloads and `pitwall export`
(cli/export.py, cli/export_fleet.py) writes them.

| module | owns |
|---|---|
| formats | Markdown, CSV, JSON and PNG; render() and write_export() for every format |
| verdict | the words every format leads with: grades, a comparison's sentence and grouped verdicts |
| rows | the tables every format shows: figures, levels, deltas, provenance |
| escape | the one escaping of server-supplied text per format: Markdown (md_text) and CSV (csv_cell) |
| html | the single-file HTML export |
| charts | DataFrame -> Altair chart builders and the charts of a scorecard (SVG/PNG) |
| fleet | the Overview's fleet table and fleet scorecards as md, csv and json |
| tune_doc | a tune run's review document (md, html) |
"""
