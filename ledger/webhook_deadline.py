"""A total deadline for one webhook delivery.

httpx's timeouts are per operation: a receiver that sends one header line every few seconds never
lets a read time out, and held a worker until Celery's time limit killed the task, which left the
delivery ``pending`` with no error. ``DeliveryDeadline`` bounds the whole exchange (connect, send,
headers, the excerpt of the body): each operation's timeout is at most the time left, and a timer
shuts the connection's socket down when the deadline passes, which ends a read in progress at once.
The socket is taken from httpcore's documented ``trace`` request extension.
"""

import contextlib
import socket
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where a delivery is sent: every Django process loads this module at start
    import httpx


class DeliveryDeadline:
    def __init__(self, seconds: float, *, per_operation: float):
        self.seconds = seconds
        self.per_operation = per_operation
        self.passed = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._cut)
        self._timer.daemon = True

    def __enter__(self) -> "DeliveryDeadline":
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()

    def timeout(self) -> "httpx.Timeout":
        """Per-operation timeouts, none longer than the whole deadline."""
        import httpx

        return httpx.Timeout(min(self.per_operation, self.seconds))

    def extensions(self) -> dict:
        return {"trace": self._trace}

    def _trace(self, name: str, info: dict) -> None:
        if name != "connection.connect_tcp.complete":
            return
        sock = info["return_value"].get_extra_info("socket")
        with self._lock:
            self._sock = sock
            passed = self.passed
        if passed:
            self._shutdown(sock)

    def _cut(self) -> None:
        with self._lock:
            self.passed = True
            sock = self._sock
        if sock is not None:
            self._shutdown(sock)

    @staticmethod
    def _shutdown(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):  # already closed: the exchange ended on its own
            sock.shutdown(socket.SHUT_RDWR)


def deadline_error(seconds: float) -> str:
    return f"DeadlineExceeded: no complete answer within {seconds:g} s (WEBHOOK_DEADLINE_SECONDS)"
