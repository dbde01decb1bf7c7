"""The runner's own output: a line per thing a person wants to know."""

from __future__ import annotations

import datetime as dt
import sys
import threading
from typing import TextIO


class Console:
    """One line per thing a person wants to know (a run started, a run ended, the server went
    away or came back); nothing per tick."""

    def __init__(self, name: str, out: TextIO | None = None):
        self.name = name
        self.out = out or sys.stdout
        self.lock = threading.Lock()

    def say(self, message: str) -> None:
        with self.lock:
            stamp = dt.datetime.now().strftime("%H:%M:%S")
            print(f"{stamp} runner {self.name}: {message}", file=self.out, flush=True)
