"""`python -m cli` is the `pitwall` command."""

from cli.main import main

raise SystemExit(main())
