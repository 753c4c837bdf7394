"""The `pitwall` command line, the top layer: it may import every other package, none imports it.

| module | owns |
|---|---|
| main | the `pitwall` entry (`main(argv) -> int`), `up`, `collect`, `status` and the subcommand table |
| common | the exit codes, `parse_duration`, the argument plumbing and the database opener (`open_db`, `CliError`) the subcommands share |
| wiring | the runner's assembly: the Runner with the launcher, scorer, alerting and exporter injected |
| profiles, tune, export, export_fleet, alerts, gpu_wall | one module per subcommand family |

`python -m cli` is the same command (cli/__main__.py); tests and the runner's detached start use it.
"""
