"""``python -m simulator`` is ``python -m simulator.launch_server``."""

from __future__ import annotations

import sys

from simulator.launch_server import main

sys.exit(main())
