"""`python -m dashboard` is the `pitwall` command."""

from dashboard.cli import main

raise SystemExit(main())
