"""``python -m evaluator``: the evaluator's command line."""

import sys

from evaluator.cli import main

if __name__ == "__main__":
    sys.exit(main())
