"""The web child of `manage.py serve`: uvicorn with the HTTP limits of config/http_limits.py.

``python -m config.http_server --host 127.0.0.1 --port 8000``. Uvicorn's command line cannot name a
protocol class, so the limits are passed here, as the production worker passes them to gunicorn.
On Ctrl-C or SIGTERM the long polls in flight are told to answer first (config/process_stop.py), so
the graceful shutdown does not wait out a runner's poll.
"""

import argparse
import contextlib
import sys

import uvicorn
from uvicorn.main import STARTUP_FAILURE

from config.http_limits import uvicorn_config_kwargs
from config.process_stop import process_stop


class StoppingServer(uvicorn.Server):
    """uvicorn's server (as ``uvicorn.run`` makes it); its signal handler tells the long polls first."""

    def handle_exit(self, sig, frame) -> None:
        process_stop()
        super().handle_exit(sig, frame)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--no-access-log", action="store_true", help="No line per request.")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args()
    config = uvicorn.Config(
        "config.asgi:application",
        host=args.host,
        port=args.port,
        access_log=not args.no_access_log,
        log_level=args.log_level,
        **uvicorn_config_kwargs(),
    )
    server = StoppingServer(config)
    with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C while stopping, as uvicorn.run ends
        server.run()
    if not server.started:
        sys.exit(STARTUP_FAILURE)


if __name__ == "__main__":
    main()
