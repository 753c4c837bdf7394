"""What may be shown and how it reads, shared by the pages, the scorecards, the exports and the CLI.

| module | owns |
|---|---|
| format | number, time and byte formats and the fixed colour meaning (pure: no Streamlit, no storage reads) |
| shown | redacted copies of stored rows and frames: what a page, an export or the CLI may show |
| panels | what the Server page charts: each panel's series, legend labels and unit (the export's charts use them too) |
| tune_result | a tune run as it reads: verdict, winner, ranking / goodput / Pareto tables, the winner's profile diff |
"""
