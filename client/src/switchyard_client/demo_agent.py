"""`python -m switchyard_client.demo_agent`: the demo agent (demo/agent.py), at the module path that
the runner's built-in demo provider, runner configs and the README name."""

import sys

from switchyard_client.demo.agent import main

if __name__ == "__main__":
    sys.exit(main())
