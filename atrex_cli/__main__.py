"""``python -m atrex_cli ...`` is ``atrex ...``."""

from atrex_cli.main import main

raise SystemExit(main())
