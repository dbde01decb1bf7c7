"""A web process that is stopping asks its long waits to answer now.

uvicorn's graceful shutdown waits for every request in flight, and a long poll holds one for up to
half a minute (a runner's ``next``: RUNNER_POLL_MAX_SECONDS; an agent waiting for a person's answer:
WAIT_MAX_SECONDS) even after its client has gone: ``make run``'s Ctrl-C waited that long for the
web child, then killed it. The embedded server's exit handler (config/http_server.py) sets this
flag, and each long poll looks at it between two looks at the database and answers as at its
deadline; the client asks again wherever it runs next.
"""

import threading

_stopping = threading.Event()


def process_stop() -> None:
    """This process is stopping: long polls answer at their next look."""
    _stopping.set()


def process_stopping() -> bool:
    return _stopping.is_set()


def process_stop_reset() -> None:
    """For tests: the process goes on."""
    _stopping.clear()
