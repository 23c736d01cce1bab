"""``python -m sculpt ...``: the same command line as the ``sculpt`` console script (sculpt.cli:main)."""

from .cli import main

raise SystemExit(main())
