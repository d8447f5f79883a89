"""``python -m codemode``: the command line (the same as the ``codemode`` console script)."""

from codemode.app.cli import main

raise SystemExit(main())
