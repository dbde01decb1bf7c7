"""The web child of `manage.py serve`: uvicorn with the HTTP limits of config/http_limits.py.

``python -m config.http_server --host 127.0.0.1 --port 8000``. Uvicorn's command line cannot name a
protocol class, so the limits are passed here, as the production worker passes them to gunicorn.
"""

import argparse

import uvicorn

from config.http_limits import uvicorn_config_kwargs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--no-access-log", action="store_true", help="No line per request.")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args()
    uvicorn.run(
        "config.asgi:application",
        host=args.host,
        port=args.port,
        access_log=not args.no_access_log,
        log_level=args.log_level,
        **uvicorn_config_kwargs(),
    )


if __name__ == "__main__":
    main()
