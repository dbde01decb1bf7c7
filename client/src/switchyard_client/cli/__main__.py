"""`python -m switchyard_client.cli`: the `switchyard` command as Claude Code's hook settings,
`manage.py serve` and the tests run it."""

import sys

from switchyard_client.cli import main

if __name__ == "__main__":
    sys.exit(main())
